"""A call whose result holds no tensor (``t.size()``, ``t.dim()``, ``bool(t)``) leaves the torch adapter's op path
before the builder's lock when it changed no argument in place, even on tensors that require grad: it has nothing
to report. One that wrote an argument (``h[0] = 5.0``: ``__setitem__`` returns None) still takes the lock and is
reported at its line."""


import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from tests.call_counting import counting_lock, line_of  # noqa: E402

pytestmark = pytest.mark.oracle






def test_calls_returning_no_tensor_take_no_lock_unless_they_wrote_in_place():
    w = torch.ones(3, requires_grad=True)
    with gradviz.trace(engine="torch") as tr:
        h = w * 2
        positive = w.sum() > 0
        taken = counting_lock(tr.builder)
        sizes = (h.size(0), h.dim(), w.size(), bool(positive))
        plain = list(taken)
        del taken[:]
        h[0] = 5.0  # an in-place write through a call that returns None: reported
        written = list(taken)
        loss = h.sum()
        loss.backward()
    assert sizes == (3, 1, torch.Size([3]), True)
    assert plain == []
    assert written == ["op"]
    doc = tr.to_dict()
    writes = [e for e in doc["events"] if e["kind"] == "inplace"]
    assert [e["location"]["line"] for e in writes] == [line_of(__file__, "h[0] = 5.0  #")]
    copy_slices = [n for n in doc["nodes"] if n["op"] == "CopySlices"]
    assert [n["location"]["line"] for n in copy_slices] == [line_of(__file__, "h[0] = 5.0  #")]
    assert w.grad.tolist() == [0.0, 2.0, 2.0]
