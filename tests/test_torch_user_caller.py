"""``user_caller``: whether torch's own code made a ``.grad`` read, a cut (``.item()``, ``.data``), a ``.grad`` write
or a factory call, and the user's frame otherwise, in one frame walk where there were two (``caller_is_internal``
then ``user_frame``). The user's reads and cuts keep their lines; the reads ``clip_grad_norm_`` makes inside torch
are not the user's."""

import pytest

torch = pytest.importorskip("torch")

import gradviz  # noqa: E402
from gradviz.tracing.adapters.torch.frames import caller_is_internal, user_caller, user_frame  # noqa: E402

pytestmark = pytest.mark.oracle


def _line_of(text):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _both_walks():
    return caller_is_internal(), user_frame(0), user_caller()


def test_one_walk_answers_as_the_two_walks_from_user_code():
    internal, frame, (one_internal, one_frame) = _both_walks()
    assert (internal, frame.f_code) == (False, _both_walks.__code__)
    assert (one_internal, one_frame.f_code) == (False, _both_walks.__code__)


def test_user_reads_and_cuts_keep_their_lines_and_torch_reads_are_not_the_users():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    with gradviz.trace(engine="torch") as tr:
        loss = model(x).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)  # reads every .grad inside torch
        g = model.weight.grad  # the user's read
        value = loss.item()  # a cut (the document's "detach" event)
        model.bias.grad = None  # a write
        fresh = torch.zeros(2)  # a factory call
    assert g is not None and fresh.shape == (2,)
    assert value == pytest.approx(float(model(x).sum().detach()))
    doc = tr.to_dict()
    events = [(e["kind"], e["location"]["line"]) for e in doc["events"]
              if e["kind"] in ("grad_read", "grad_write", "detach")]
    assert ("grad_read", _line_of("g = model.weight.grad  #")) in events
    assert [kind for kind, _ in events].count("grad_read") == 1  # none of clip_grad_norm_'s own reads
    assert ("grad_write", _line_of("model.bias.grad = None  #")) in events
    assert ("detach", _line_of("value = loss.item()  #")) in events
    made = [v for v in doc["variables"] if v.get("origin") == "factory" and v.get("shape") == [2]]
    assert [v["location"]["line"] for v in made] == [_line_of("fresh = torch.zeros(2)  #")]
