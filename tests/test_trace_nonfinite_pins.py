"""Beyond the first NaN/Inf, the first non-finite loss and the first non-finite backward gradient keep their
records: an attention mask's harmless -inf in iteration 0 must not cost a real NaN in a dropped middle iteration
its nodes and its backward."""

import pytest

import gradviz

BAD = 5  # a middle iteration: with the default window of 3 and 10 iterations, its records would be dropped


def _masked_loop(torch, trace):
    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.0)
    mask = torch.tensor([[False, False, True, True]] * 4)
    with trace() as tr:
        for it in range(10):
            x = torch.randn(4, 4)
            if it == BAD:
                x = x * float("nan")
            scores = (x @ w).masked_fill(mask, float("-inf"))  # -inf every iteration, harmless after softmax
            loss = torch.softmax(scores, dim=-1).mul(x).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr.to_dict()


def _check(doc):
    first = doc["first_nonfinite"]
    assert first["iteration"] == 0 and first["phase"] == "forward"  # the mask
    assert doc["dropped"]["iterations"] > 0
    backward = [b for b in doc["backwards"] if b["iteration"] == BAD]
    assert len(backward) == 1  # the NaN loss's backward is kept
    graphs = {g["id"] for g in doc["graphs"] if g["iteration"] == BAD}
    assert len(graphs) == 1 and graphs == set(backward[0]["graphs"])
    loss = [n for n in doc["nodes"] if n["id"] in backward[0]["root_nodes"]]
    assert len(loss) == 1 and loss[0]["nonfinite"] == "forward" and loss[0]["graph"] in graphs
    # the NaN gradients are there to read (the document writes a non-finite number as a string)
    assert "nan" in backward[0]["grad_norms"].values()


def test_a_nan_loss_in_a_dropped_iteration_keeps_its_records():
    _check(_masked_loop(gradviz, gradviz.trace))


@pytest.mark.oracle
def test_a_nan_loss_in_a_dropped_iteration_keeps_its_records_on_pytorch():
    torch = pytest.importorskip("torch")
    _check(_masked_loop(torch, lambda: gradviz.trace(engine="torch")))
