"""Iteration boundaries in real training loops: a new graph started at a call site already used this iteration
splits an iteration only provisionally; an op (or a backward) that takes inputs from the split-off graphs before
any backward folds them back into one step. Loops with no backward at all still get one iteration per pass."""

import pytest

import gradviz

STEPS = 3


def _reinforce(torch, trace, steps=STEPS):
    """Policy forward per environment step, log-probs stacked at the end of the episode (a loss, a backward)."""
    torch.manual_seed(0)
    policy = nn_of(torch).Sequential(nn_of(torch).Linear(4, 8), nn_of(torch).Tanh(), nn_of(torch).Linear(8, 2))
    opt = torch.optim.SGD(policy.parameters(), lr=0.01)
    states = torch.randn(5, 4)
    with trace() as tr:
        for _ in range(steps):
            log_probs = []
            for t in range(5):
                logits = policy(states[t])
                log_probs.append(torch.log_softmax(logits, dim=-1)[0])
            loss = -torch.stack(log_probs).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr.to_dict()


def _seq2seq(torch, trace):
    """Encoder over the source, then a decoder step per target token: embed(token) starts a graph each step, the
    hidden state joins it to the previous steps."""
    torch.manual_seed(0)
    nn_ = nn_of(torch)
    embed, enc, dec, out = nn_.Embedding(6, 4), nn_.Linear(4, 4), nn_.Linear(8, 4), nn_.Linear(4, 6)
    params = [*embed.parameters(), *enc.parameters(), *dec.parameters(), *out.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    source, target = torch.tensor([1, 2, 3]), torch.tensor([2, 3, 4, 5])
    with trace() as tr:
        for _ in range(STEPS):
            hidden = torch.tanh(enc(embed(source))).mean(0)
            loss = 0
            for token in target:
                e = embed(token)
                hidden = torch.tanh(dec(torch.cat([e, hidden])))
                loss = loss + out(hidden).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr.to_dict()


def _lstm(torch, trace):
    """An LSTM cell unrolled by hand: x_t @ W_ih has only a leaf and a plain input, so each timestep and layer
    starts a graph at the same call site; h @ W_hh joins it to the previous timestep."""
    torch.manual_seed(0)
    w_ih = torch.randn(3, 16, requires_grad=True)
    w_hh = torch.randn(4, 16, requires_grad=True)
    opt = torch.optim.SGD([w_ih, w_hh], lr=0.01)
    xs = torch.randn(4, 2, 3)
    with trace() as tr:
        for _ in range(STEPS):
            h = torch.zeros(2, 4)
            c = torch.zeros(2, 4)
            for x_t in xs:
                gates = x_t @ w_ih + h @ w_hh
                i, f, g, o = gates.chunk(4, dim=1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
            loss = h.pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr.to_dict()


def nn_of(torch):
    return torch.nn


def _gradviz_trace():
    return gradviz.trace()


LOOPS = [_reinforce, _seq2seq, _lstm]


def _check(doc):
    assert doc["iterations"] == STEPS
    assert len(doc["backwards"]) == STEPS
    assert [b["iteration"] for b in doc["backwards"]] == list(range(STEPS))
    assert {g["iteration"] for g in doc["graphs"]} == set(range(STEPS))
    assert [s["count"] for s in doc["structures"]] == [STEPS]  # one graph per step, the same each time
    assert [p["iteration"] for p in doc["memory"]["series"]] == list(range(STEPS))
    assert {n["iteration"] for n in doc["nodes"] if n["op"] != "AccumulateGrad"} == set(range(STEPS))


@pytest.mark.parametrize("loop", LOOPS, ids=lambda f: f.__name__[1:])
def test_one_iteration_per_training_step_on_gradviz(loop):
    _check(loop(gradviz, _gradviz_trace))


@pytest.mark.oracle
@pytest.mark.parametrize("loop", LOOPS, ids=lambda f: f.__name__[1:])
def test_one_iteration_per_training_step_on_pytorch(loop):
    torch = pytest.importorskip("torch")
    _check(loop(torch, lambda: gradviz.trace(engine="torch")))


def test_the_kept_window_is_whole_training_steps():
    doc = _reinforce(gradviz, _gradviz_trace, steps=8)
    assert doc["iterations"] == 8 and doc["dropped"]["iterations"] == 2
    assert sorted({g["iteration"] for g in doc["graphs"]}) == [0, 1, 2, 5, 6, 7]
    kept = [g for g in doc["graphs"] if g["iteration"] == 6]
    assert len(kept) == 1 and sum(n["op"] == "LogSoftmaxBackward" for n in doc["nodes"]
                                  if n["graph"] == kept[0]["id"]) == 5  # the whole episode, not one policy pass


def test_a_forward_only_loop_still_splits_and_closes_its_iterations():
    """No backward at all: each pass is an iteration; each pass's graph is dead by the next, so its iteration is
    closed then and leaves the window like any other."""
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        for _ in range(10):
            (w * 3).exp().sum()
    doc = tr.to_dict()
    assert doc["iterations"] == 10
    assert [s["count"] for s in doc["structures"]] == [10]
    assert sorted(g["iteration"] for g in doc["graphs"]) == [0, 1, 2, 7, 8, 9]
    assert doc["dropped"]["iterations"] >= 3
    assert [p["iteration"] for p in doc["memory"]["series"]] == list(range(10))


def test_forward_only_graphs_joined_at_the_end_are_one_iteration():
    """Passes kept alive and summed before any backward were one step all along."""
    w = gradviz.randn(3, requires_grad=True)
    with gradviz.trace() as tr:
        outs = [(w * 3).exp().sum() for _ in range(5)]
        total = outs[0]
        for o in outs[1:]:
            total = total + o
    doc = tr.to_dict()
    assert doc["iterations"] == 1
    assert len(doc["graphs"]) == 1 and doc["graphs"][0]["iteration"] == 0
