"""Closure scripts run the same way on both engines (``lib`` is ``torch`` or ``gradviz`` imported as torch): the
tests of each engine call them and check the lines their reports point at (``marked_line(__file__, ...)``)."""

import pytest

import gradviz


def lbfgs_keeping_the_first_calls_graph(lib, engine):
    """LBFGS writes the parameters between its closure calls; the second call backwards through the graph the
    first call kept with ``retain_graph``, which saved the parameter before the write. Returns the document."""
    lib.manual_seed(0)
    w = lib.nn.Parameter(lib.randn(3))
    x = lib.randn(3)
    opt = lib.optim.LBFGS([w], max_iter=2)
    kept = []

    def closure():
        opt.zero_grad()
        if kept:
            kept[0].backward()  # the first call's graph, in the second call
        loss = ((w ** 2) * x).sum()
        loss.backward(retain_graph=True)
        kept.append(loss)
        return loss

    with gradviz.trace(engine=engine) as tr:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            opt.step(closure)  # LBFGS writes w between calls
    return tr.to_dict()
