"""Calls on plain data (no argument requiring grad, none changed in place, a result without a graph node) leave
the torch adapter's op path before the builder's lock, having nothing to report; every other call still takes the
lock and is reported as before: an in-place write on plain data, an op whose argument requires grad. And
``where``'s frame walk stepping over the adapter's own frames finds the same user frame as the full walk."""


import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from gradviz.tracing.adapters.torch.frames import where  # noqa: E402
from tests.call_counting import counting_lock, line_of  # noqa: E402

pytestmark = pytest.mark.oracle






def test_plain_data_calls_take_no_lock_but_in_place_writes_and_graph_ops_still_do():
    data = torch.arange(4.0)
    w = torch.ones(4, requires_grad=True)
    with gradviz.trace(engine="torch") as tr:
        taken = counting_lock(tr.builder)
        scaled = (data * 2 + 1).clamp(max=5.0)  # three calls on plain data
        plain = list(taken)
        data.add_(1)  # an in-place write on plain data: reported
        after_write = list(taken)
        out = (w * scaled).sum()  # graph ops: reported
    assert plain == []
    assert after_write.count("op") == 1
    assert taken.count("op") >= 3
    doc = tr.to_dict()
    writes = [e for e in doc["events"] if e["kind"] == "inplace"]
    assert [e["location"]["line"] for e in writes] == [line_of(__file__, "data.add_(1)  #")]
    ops = {(n["op"], n["location"]["line"]) for n in doc["nodes"] if n.get("location")}
    assert ("MulBackward0", line_of(__file__, "out = (w * scaled)")) in ops
    assert ("SumBackward0", line_of(__file__, "out = (w * scaled)")) in ops
    assert out.item() == pytest.approx(float((torch.arange(4.0) * 2 + 1).clamp(max=5.0).sum()))


def _inner(ours):
    return where(ours)


def _outer(ours):
    return _inner(ours)


def test_where_stepping_over_known_frames_finds_the_frame_the_full_walk_would():
    frame, site = _outer(1)  # _inner's frame stepped over: the first frame outside gradviz above it is _outer's
    assert frame.f_code is _outer.__code__
    assert type(site) is int  # (a tuple would mean torch's own code made the call)
    frame, _ = _outer(0)
    assert frame.f_code is _inner.__code__
