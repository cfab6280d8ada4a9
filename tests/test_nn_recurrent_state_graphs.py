"""A recurrent layer given a state with no graph (truncated BPTT's detached state, or zeros made by hand) keeps
one graph per call: with two layers, each layer's first recurrent matmul used to start a graph of its own at the
module's line, and the tracer read the second start as a new iteration (21 backward calls became 396 iterations
and a retained-graph false alarm)."""

import numpy as np
import pytest

import gradviz
import gradviz.nn as nn
import gradviz.nn.functional as F


def tbptt(layer, state, chunks=4):
    gradviz.manual_seed(0)
    head = nn.Linear(layer.hidden_size * (2 if layer.bidirectional else 1), 1)
    opt = gradviz.optim.SGD(list(layer.parameters()) + list(head.parameters()), lr=0.1)
    data = gradviz.randn(chunks, 5, 2, 3)  # chunks of (time, batch, features)
    with gradviz.trace() as tr:
        for x in data:
            if state is not None:
                state = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
            out, final = layer(x, state)
            state = None if state is None else final
            loss = head(out).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr.to_dict()


@pytest.mark.parametrize("make, state", [
    (lambda: nn.LSTM(3, 4, num_layers=2), lambda: (gradviz.zeros(2, 2, 4), gradviz.zeros(2, 2, 4))),
    (lambda: nn.LSTM(3, 4, num_layers=1, bidirectional=True), lambda: (gradviz.zeros(2, 2, 4),
                                                                        gradviz.zeros(2, 2, 4))),
    (lambda: nn.RNN(3, 4, num_layers=3), lambda: gradviz.zeros(3, 2, 4)),
    # no state given, but the data itself has no graph: both directions' input projections are one start
    (lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True), lambda: None),
    (lambda: nn.LSTM(3, 4, bidirectional=True), lambda: None),
])
def test_a_detached_state_keeps_one_graph_and_one_iteration_per_chunk(make, state):
    doc = tbptt(make(), state())
    assert doc["iterations"] == 4
    assert [g["iteration"] for g in doc["graphs"]] == [0, 1, 2, 3]
    assert doc["diagnostics"] == []


def test_linear_with_a_bias_of_the_output_shape_sums_nothing_down():
    gradviz.manual_seed(1)
    h = gradviz.randn(2, 3, dtype=gradviz.float64, requires_grad=True)
    w = gradviz.randn(4, 3, dtype=gradviz.float64, requires_grad=True)
    b = gradviz.randn(2, 4, dtype=gradviz.float64, requires_grad=True)
    assert gradviz.autograd.gradcheck(F.linear, (h, w, b))
    F.linear(h, w, b).backward(gradviz.ones(2, 4, dtype=gradviz.float64) * gradviz.arange(4.0, dtype=gradviz.float64))
    np.testing.assert_array_equal(b.grad.numpy(), np.tile(np.arange(4.0), (2, 1)))


def test_a_gru_given_a_detached_state_keeps_one_iteration_per_chunk():
    """GRU's recurrent matmul is its own node, so a given state with no graph begins a second graph at the
    module's line; the tracer's provisional split is folded back when the gates join the two."""
    doc = tbptt(nn.GRU(3, 4), gradviz.zeros(1, 2, 4))
    assert doc["iterations"] == 4
    assert [g["iteration"] for g in doc["graphs"]] == [0, 1, 2, 3]
