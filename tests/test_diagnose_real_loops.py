"""Correct training loops of the common kinds come out with no diagnostics at all, under `gradviz.trace()` and
under `gradviz run`; the same loops with one planted mistake each are reported with the matching code at the
line of the mistake. A debugger that cries wolf on correct code is worse than none.

Each loop is small (a few iterations of tiny layers) so the file runs in seconds.
"""

import json
import textwrap

import pytest
from click.testing import CliRunner

import gradviz
from gradviz.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

LOOPS = {}

# DCGAN-style: the discriminator's two losses, then the generator's loss through the discriminator.
LOOPS["gan"] = """
import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)
netG = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 6), nn.Tanh())
netD = nn.Sequential(nn.Linear(6, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_label, fake_label = 1.0, 0.0
for step in range(4):
    real = torch.randn(8, 6)
    label = torch.full((8, 1), real_label)
    netD.zero_grad()
    errD_real = criterion(netD(real), label)
    errD_real.backward()
    noise = torch.randn(8, 4)
    fake = netG(noise)
    label.fill_(fake_label)
    errD_fake = criterion(netD(fake.detach()), label)
    errD_fake.backward()
    optD.step()
    netG.zero_grad()
    label.fill_(real_label)
    errG = criterion(netD(fake), label)
    errG.backward()
    optG.step()
    losses = ((errD_real + errD_fake).item(), errG.item())
"""

# seq2seq: a GRU encoder, a GRUCell decoder fed the target token (teacher forcing) or its own guess.
LOOPS["seq2seq"] = """
import random

import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(0)
random.seed(0)
VOCAB, HIDDEN, SOS = 7, 12, 0


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.rnn = nn.GRU(HIDDEN, HIDDEN, batch_first=True)

    def forward(self, src):
        _, hidden = self.rnn(self.embed(src))
        return hidden


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.cell = nn.GRUCell(HIDDEN, HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, token, hidden):
        hidden = self.cell(self.embed(token), hidden)
        return self.out(hidden), hidden


encoder, decoder = Encoder(), Decoder()
params = list(encoder.parameters()) + list(decoder.parameters())
optimizer = torch.optim.SGD(params, lr=0.1)
epoch_loss = 0.0
for it in range(3):
    src = torch.randint(1, VOCAB, (4, 5))
    tgt = torch.randint(1, VOCAB, (4, 4))
    optimizer.zero_grad()
    hidden = encoder(src)[0]
    token = torch.full((4,), SOS, dtype=torch.long)
    loss = 0
    for t in range(tgt.shape[1]):
        logits, hidden = decoder(token, hidden)
        loss = loss + F.cross_entropy(logits, tgt[:, t])
        teacher = random.random() < 0.5
        token = tgt[:, t] if teacher else logits.argmax(dim=1)
    loss.backward()
    nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    epoch_loss += loss.item() / tgt.shape[1]
"""

# An LSTM language model trained with truncated backpropagation through time.
LOOPS["bptt"] = """
import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)
VOCAB, HIDDEN, BPTT = 10, 8, 4


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.lstm = nn.LSTM(HIDDEN, HIDDEN, num_layers=2)
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    def forward(self, x, hidden):
        out, hidden = self.lstm(self.embed(x), hidden)
        return self.decoder(out), hidden


model = LM()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
data = torch.randint(0, VOCAB, (17, 2))
hidden = (torch.zeros(2, 2, HIDDEN), torch.zeros(2, 2, HIDDEN))
for i in range(0, data.shape[0] - 1, BPTT):
    x, y = data[i:i + BPTT], data[i + 1:i + 1 + BPTT]
    hidden = tuple(h.detach() for h in hidden)
    model.zero_grad()
    output, hidden = model(x, hidden)
    loss = criterion(output.reshape(-1, VOCAB), y.reshape(-1))
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
"""

# A transformer classifier; nn.TransformerEncoder deep-copies its template layer, which is never called.
LOOPS["transformer"] = """
import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(0)
VOCAB, D, CLASSES = 12, 8, 3


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        layer = nn.TransformerEncoderLayer(d_model=D, nhead=2, dim_feedforward=16, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


model = Classifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    tokens = torch.randint(0, VOCAB, (4, 5))
    labels = torch.randint(0, CLASSES, (4,))
    optimizer.zero_grad()
    loss = F.cross_entropy(model(tokens), labels)
    loss.backward()
    optimizer.step()
"""

# Fine-tuning: a frozen backbone except its last convolution, and a new head.
LOOPS["finetune"] = """
import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ReLU(), nn.Flatten())
head = nn.Linear(4 * 4 * 4, 2)
backbone.requires_grad_(False)
backbone[2].requires_grad_(True)
optimizer = torch.optim.SGD([*backbone[2].parameters(), *head.parameters()], lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss()
for step in range(3):
    images = torch.randn(3, 1, 8, 8)
    labels = torch.tensor([0, 1, 1])
    optimizer.zero_grad()
    features = backbone(images)
    loss = criterion(head(features), labels)
    loss.backward()
    optimizer.step()
"""

# Gradient accumulation done right: a step (and a reset) every ACCUMULATE micro-batches.
LOOPS["accumulate"] = """
import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.MSELoss()
ACCUMULATE, BATCHES = 3, 9
optimizer.zero_grad()
for i in range(BATCHES):
    x, y = torch.randn(4, 5), torch.randn(4, 1)
    loss = criterion(model(x), y) / ACCUMULATE
    loss.backward()
    if (i + 1) % ACCUMULATE == 0:
        optimizer.step()
        optimizer.zero_grad()
"""

# Training with BatchNorm and Dropout, and a validation pass per epoch in eval mode under no_grad.
LOOPS["validate"] = """
import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 10), nn.BatchNorm1d(10), nn.ReLU(), nn.Dropout(0.2), nn.Linear(10, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()
val_x, val_y = torch.randn(6, 6), torch.randint(0, 3, (6,))
history = []
for epoch in range(3):
    model.train()
    for _ in range(2):
        x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val_loss = criterion(model(val_x), val_y)
    history.append(val_loss)
"""

# REINFORCE: log-probabilities of the sampled actions, summed against normalised returns once per episode.
LOOPS["reinforce"] = """
import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
GAMMA = 0.9
for episode in range(3):
    log_probs, rewards = [], []
    state = torch.randn(4)
    for t in range(5):
        probs = F.softmax(policy(state), dim=-1)
        action = torch.multinomial(probs, 1).item()
        log_probs.append(torch.log(probs[action]))
        rewards.append(1.0 if action == 0 else -0.5)
        state = torch.randn(4)
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + GAMMA * running
        returns.insert(0, running)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    loss = -(torch.stack(log_probs) * returns).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

# Two losses over a shared trunk, each backwarded: the first must keep the trunk's graph for the second.
LOOPS["two_losses"] = """
import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(5, 8), nn.ReLU())
classify, regress = nn.Linear(8, 3), nn.Linear(8, 1)
optimizer = torch.optim.SGD([{"params": trunk.parameters(), "lr": 0.01},
                             {"params": [*classify.parameters(), *regress.parameters()]}], lr=0.1)
for step in range(4):
    x, y, t = torch.randn(6, 5), torch.randint(0, 3, (6,)), torch.randn(6, 1)
    h = trunk(x)
    loss_c = F.cross_entropy(classify(h), y)
    loss_r = F.mse_loss(regress(h), t)
    optimizer.zero_grad()
    loss_c.backward(retain_graph=True)
    loss_r.backward()
    optimizer.step()
"""

# A causal language model: attention masks hold -inf, which softmax turns into 0 (finite from there on).
LOOPS["masked_lm"] = """
import math

import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(0)
V, D, T = 11, 8, 5
embed = nn.Embedding(V, D)
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True), 1)
qkv = nn.Linear(D, 3 * D)
head = nn.Linear(D, V)
optimizer = torch.optim.Adam([*embed.parameters(), *encoder.parameters(), *qkv.parameters(), *head.parameters()],
                             lr=1e-3)
causal = nn.Transformer.generate_square_subsequent_mask(T)
padding = torch.tensor([[False, False, False, False, False], [False, False, False, True, True]])
allowed = torch.tril(torch.ones(T, T)).bool()
for step in range(3):
    x = torch.randint(0, V, (2, T + 1))
    h = encoder(embed(x[:, :-1]), mask=causal, src_key_padding_mask=padding)
    q, k, v = qkv(h).chunk(3, dim=-1)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(~allowed, float("-inf"))
    h = F.softmax(scores, dim=-1) @ v
    loss = F.cross_entropy(head(h).reshape(-1, V), x[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

# DQN: the target network is detached from the loss on purpose and follows the online one by soft updates.
LOOPS["dqn"] = """
import copy

import gradviz as torch
import gradviz.nn as nn
import gradviz.nn.functional as F

torch.manual_seed(0)
online = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
target = copy.deepcopy(online)
optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
for step in range(4):
    s, a, r, s2 = torch.randn(5, 4), torch.randint(0, 2, (5,)), torch.randn(5), torch.randn(5, 4)
    y = r + 0.9 * target(s2).max(dim=1)[0].detach()
    q = online(s).gather(1, a.unsqueeze(1)).squeeze(1)
    loss = F.smooth_l1_loss(q, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p_target, p in zip(target.parameters(), online.parameters()):
            p_target.mul_(0.99).add_(0.01 * p)
"""

# WGAN with weight clipping and a loss scale undone by hand: five critic steps per generator step. The
# generator's backward reaches the critic, whose clipped weights make its last layer's gradient far larger
# than the others': that gradient is reset before the critic's next step, so it is not judged.
LOOPS["wgan_clip"] = """
import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
D = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optD = torch.optim.SGD(D.parameters(), lr=5e-3)
optG = torch.optim.SGD(G.parameters(), lr=5e-3)
SCALE = 128.0
for it in range(3):
    for _ in range(2):
        real, z = torch.randn(5, 4), torch.randn(5, 3)
        optD.zero_grad()
        lossD = -(D(real).mean() - D(G(z).detach()).mean())
        (lossD * SCALE).backward()
        for p in D.parameters():
            p.grad /= SCALE
        optD.step()
        for p in D.parameters():
            p.data.clamp_(-0.01, 0.01)
    optG.zero_grad()
    lossG = -D(G(torch.randn(5, 3))).mean()
    lossG.backward()
    optG.step()
"""

# (loop, planted-mistake id): the edits that plant it, then the expected findings as (code, severity, the text
# of the line it is reported at). Other findings may only be the listed consequences of the same mistake.
PLANTED = {
    # the generator's graph is freed by the discriminator's backward, then backwarded again
    ("gan", "no-detach"): ([("netD(fake.detach())", "netD(fake)")],
                           [("graph-freed", "error", "errG.backward()")], {"retained-graph"}),
    # the generator's step leaves gradients in D that D's next step sums in (two D steps are never in one stretch
    # of full records with the default window: the tracer's summed_grads on the step event tells)
    ("gan", "no-zero-grad"): ([("    netD.zero_grad()\n", "")],
                              [("grad-accumulation", "warning", "errG.backward()")], set()),
    ("seq2seq", "total-loss"): ([("epoch_loss += loss.item() / tgt.shape[1]", "epoch_loss += loss / tgt.shape[1]")],
                                [("retained-graph", "warning", "epoch_loss += loss / tgt.shape[1]")], set()),
    # no detach across BPTT: the second chunk's backward goes back into the first chunk's freed graph
    ("bptt", "no-detach"): ([("    hidden = tuple(h.detach() for h in hidden)\n", "")],
                            [("graph-freed", "error", "loss.backward()"),
                             ("hidden-state-not-detached", "warning", "output, hidden = model(x, hidden)")],
                            {"retained-graph"}),
    # ...and the usual "fix", retain_graph=True: every chunk's graph is kept, and the step then changes weights
    # the old graphs saved (the second chunk's backward fails: two iterations are too few to call the retained
    # memory growing, so it is reported as info)
    ("bptt", "retain-graph"): ([("    hidden = tuple(h.detach() for h in hidden)\n", ""),
                                ("loss.backward()", "loss.backward(retain_graph=True)")],
                               [("stale-version", "error", "optimizer.step()"),
                                ("retained-graph", "info", "out, hidden = self.lstm(self.embed(x), hidden)"),
                                ("hidden-state-not-detached", "warning", "output, hidden = model(x, hidden)")],
                               set()),
    # the template layer registered as a submodule: given to the optimizer, never called
    ("transformer", "template-registered"): (
        [("        self.encoder = nn.TransformerEncoder(layer",
          "        self.layer = layer\n        self.encoder = nn.TransformerEncoder(layer")],
        [("unused-parameter", "warning", "layer = nn.TransformerEncoderLayer(")], set()),
    # the backbone's trainable layer cut off from the loss
    ("finetune", "detached-features"): ([("features = backbone(images)", "features = backbone(images).detach()")],
                                        [("graph-cut", "warning", "features = backbone(images).detach()")], set()),
    ("accumulate", "no-zero-grad"): ([("        optimizer.zero_grad()\n", ""),
                                      ("ACCUMULATE, BATCHES = 3, 9", "ACCUMULATE, BATCHES = 2, 6")],
                                     [("grad-accumulation", "warning", "loss.backward()")], set()),
    # validation with grad on, every validation loss kept (with its graph) in the history
    ("validate", "no-no-grad"): ([("    with torch.no_grad():\n        val_loss", "    if True:\n        val_loss")],
                                 [("retained-graph", "warning", "val_loss = criterion(model(val_x), val_y)")],
                                 {"stale-version"}),
    # the episode's lists are not reset: the second episode's loss goes back into the first episode's graph
    ("reinforce", "lists-not-reset"): ([("    log_probs, rewards = [], []\n", ""),
                                        ("GAMMA = 0.9\n", "GAMMA = 0.9\nlog_probs, rewards = [], []\n")],
                                       [("graph-freed", "error", "loss.backward()")], {"retained-graph"}),
    # without retain_graph the first backward frees the trunk's graph that the second needs
    ("two_losses", "no-retain"): ([("loss_c.backward(retain_graph=True)", "loss_c.backward()")],
                                  [("graph-freed", "error", "loss_r.backward()")], set()),
    # a sequence whose every key is padding: with the causal mask its first query attends to nothing, and
    # softmax over a row of -inf is NaN, all the way to the loss
    ("masked_lm", "all-padding"): ([("[False, False, False, True, True]", "[True, True, True, True, True]")],
                                   [("nan-inf", "warning", "h = encoder(embed(x[:, :-1])")], set()),
    # the online network's Q-values detached too: nothing in the loss requires grad any more
    ("dqn", "online-detached"): ([("online(s).gather(", "online(s).detach().gather(")],
                                 [("no-requires-grad", "error", "loss.backward()")], set()),
    # the target network handed to the optimizer as well, while its values are detached from the loss
    ("dqn", "target-optimized"): ([("torch.optim.Adam(online.parameters()",
                                    "torch.optim.Adam([*online.parameters(), *target.parameters()]")],
                                  [("graph-cut", "warning", "y = r + 0.9 * target(s2)")], set()),
    # clipping the weights in place without .data (or no_grad): an in-place op on leaves that require grad
    ("wgan_clip", "clip-in-graph"): ([("p.data.clamp_(-0.01, 0.01)", "p.clamp_(-0.01, 0.01)")],
                                     [("leaf-inplace", "error", "p.clamp_(-0.01, 0.01)")], set()),
}


def planted_source(loop, mistake):
    source = LOOPS[loop]
    for old, new in PLANTED[(loop, mistake)][0]:
        assert source.count(old) == 1, (loop, old)
        source = source.replace(old, new)
    return source


def write(tmp_path, source):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def traced(path, window=3):
    """Run the script file under gradviz.trace(), as __main__; its globals stay alive until the trace stops."""
    scope = {"__name__": "__main__", "__file__": str(path)}
    tr = gradviz.trace(window=window)
    try:
        with tr:
            exec(compile(path.read_text(), str(path), "exec"), scope)
    except RuntimeError:
        pass  # the trace records what ended the block, as `gradviz run` does
    return tr.to_dict()


def found(doc):
    return [(d["code"], d["severity"], d["location"] and d["location"]["line"], d["message"])
            for d in doc["diagnostics"]]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_correct_loop_has_no_diagnostics_under_trace(loop, tmp_path):
    doc = traced(write(tmp_path, LOOPS[loop]))
    assert doc["status"]["exception"] is None
    assert doc["internal_errors"] == []
    assert found(doc) == []
    assert len(doc["backwards"]) + doc["dropped"]["backwards"] >= 3, "the loop really trained"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_correct_loop_has_no_diagnostics_under_gradviz_run(loop, tmp_path):
    path = write(tmp_path, LOOPS[loop])
    result = CliRunner().invoke(main, ["run", "--json-only", "--fail-on", "warning", str(path)],
                                catch_exceptions=False)
    doc = json.loads(result.output)
    assert found(doc) == [] and result.exit_code == 0
    assert doc["status"]["completed"] is True


@pytest.mark.parametrize("loop,mistake", sorted(PLANTED))
def test_planted_mistake_is_reported_at_its_line(loop, mistake, tmp_path):
    _, expected, consequences = PLANTED[(loop, mistake)]
    path = write(tmp_path, planted_source(loop, mistake))
    lines = path.read_text().splitlines()
    doc = traced(path)  # the default window: a GAN step is three iterations, grad-accumulation reads summed_grads
    got = found(doc)
    for code, severity, marker in expected:
        (line,) = [i for i, text in enumerate(lines, 1) if marker in text]
        assert (code, severity, line) in [g[:3] for g in got], got
    allowed = {code for code, _, _ in expected} | consequences
    assert {g[0] for g in got} <= allowed, got


def test_validation_with_grad_on_is_wasteful_not_wrong(tmp_path):
    """Without no_grad the validation pass builds a graph that no backward uses; the next training step changes
    the weights it saved. The graph dies at the next validation: nothing is stale, nothing is kept."""
    source = LOOPS["validate"].replace("    with torch.no_grad():\n        val_loss", "    if True:\n        val_loss")
    source = source.replace("history.append(val_loss)", "history.append(val_loss.item())")
    doc = traced(write(tmp_path, source))
    assert found(doc) == []
    # the same graph kept alive to the end (the planted mistake) is reported, stale-version included
    kept = traced(write(tmp_path, planted_source("validate", "no-no-grad")))
    assert {"retained-graph", "stale-version"} <= {g[0] for g in found(kept)}


def test_a_second_backward_from_inside_the_retained_graph_counts_a_gradient_twice(tmp_path):
    """Unlike a second loss, a backward that starts inside the graph a retain_graph=True backward ran (the seed's
    `y1.backward(...)` after `loss.backward(retain_graph=True)`) adds the same loss's gradient again."""
    doc = traced(write(tmp_path, """
        import gradviz as torch
        import gradviz.nn as nn
        model1, model2 = nn.Linear(3, 4), nn.Linear(4, 1)
        y1 = model1(torch.randn(2, 3))
        loss = model2(y1).sum()
        loss.backward(retain_graph=True)
        y1.backward(torch.ones(2, 4))
    """))
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "retained-graph"]
    assert "adding `model1.weight`, `model1.bias`'s gradient a second time" in d["message"]


def test_nan_from_a_masked_branch_is_reported_in_backward(tmp_path):
    """`where` absorbs the forward NaN of log(0) (not reported), but its backward multiplies 0 by 1/0."""
    doc = traced(write(tmp_path, """
        import gradviz as torch
        x = torch.tensor([0.0, 1.0], requires_grad=True)
        y = torch.where(x > 0, x.log(), torch.zeros(2))
        y.sum().backward()
    """))
    (d,) = doc["diagnostics"]
    assert (d["code"], d["location"]["line"], d["details"]["phase"]) == ("nan-inf", 3, "backward")
