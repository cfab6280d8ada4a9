"""Each diagnostic reproduced by a small script run under gradviz.trace(): code, severity, location line and the
nodes/Variables involved — and the fixed script is clean (no warning, no error)."""

import textwrap

import pytest

import gradviz

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

PRELUDE = """\
import gradviz as torch
import gradviz.nn as nn
torch.manual_seed(0)
"""


def run(tmp_path, body, name="script.py"):
    """Run PRELUDE + body as a script file under a trace; returns (document, source lines)."""
    source = PRELUDE + textwrap.dedent(body)
    path = tmp_path / name
    path.write_text(source)
    code = compile(source, str(path), "exec")
    tr = gradviz.trace()
    scope = {"__name__": "__main__", "__file__": str(path)}  # alive until the trace stops, as in `gradviz run`
    try:
        with tr:
            exec(code, scope)
    except RuntimeError:
        pass  # the trace records what ended the block, as `gradviz run` does
    return tr.to_dict(), source.splitlines()


def line(lines, marker):
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def only(doc, code):
    found = [d for d in doc["diagnostics"] if d["code"] == code]
    assert len(found) == 1, [(d["code"], d["message"]) for d in doc["diagnostics"]]
    return found[0]


def assert_clean(doc):
    loud = [(d["code"], d["message"]) for d in doc["diagnostics"] if d["severity"] in ("error", "warning")]
    assert loud == []


def var(doc, name):
    return next(v for v in doc["variables"] if v["name"] == name)


def var_at(doc, lines, marker):
    """The last Variable made on the line containing ``marker`` (names come from frames at backward/stop)."""
    n = line(lines, marker)
    return [v for v in doc["variables"] if v["location"] and v["location"]["line"] == n][-1]


def test_none_grad_and_fix(tmp_path):
    doc, lines = run(tmp_path, """
        w = torch.randn(3, 3, requires_grad=True)
        h = w * 2
        loss = h.sum()
        loss.backward()
        print(h.grad)
    """)
    d = only(doc, "none-grad")
    h = var(doc, "h")
    assert (d["severity"], d["location"]["line"]) == ("warning", line(lines, "print(h.grad)"))
    assert d["variables"] == [h["id"]] and d["nodes"] == [h["node"]]
    assert doc["nodes"][h["node"]]["op"] == "MulBackward"
    assert {r["role"]: r["location"]["line"] for r in d["related"]}["backward ran here"] == line(lines, "backward")
    fixed, _ = run(tmp_path, """
        w = torch.randn(3, 3, requires_grad=True)
        h = w * 2
        h.retain_grad()
        h.sum().backward()
        print(h.grad)
    """)
    assert fixed["diagnostics"] == []


def test_nonscalar_backward_and_fix(tmp_path):
    doc, lines = run(tmp_path, """
        x = torch.randn(4, requires_grad=True)
        out = x.exp()
        out.backward()
    """)
    d = only(doc, "nonscalar-backward")
    out = var(doc, "out")
    assert (d["severity"], d["location"]["line"]) == ("error", line(lines, "out.backward()"))
    assert d["variables"] == [out["id"]] and d["nodes"] == [out["node"]]
    assert d["links"] == []
    fixed, _ = run(tmp_path, """
        x = torch.randn(4, requires_grad=True)
        x.exp().sum().backward()
    """)
    assert fixed["diagnostics"] == []


def test_stale_version_predicted_before_any_backward(tmp_path):
    doc, lines = run(tmp_path, """
        x = torch.randn(5, requires_grad=True)
        y = x.sigmoid()
        y.mul_(2)
    """)
    d = only(doc, "stale-version")
    assert (d["severity"], d["location"]["line"]) == ("warning", line(lines, "y.mul_(2)"))
    saver = doc["nodes"][d["nodes"][0]]
    assert saver["op"] == "SigmoidBackward" and saver["location"]["line"] == line(lines, "x.sigmoid()")
    assert saver["outputs"][0] in d["variables"]
    assert (d["details"]["saved_version"], d["details"]["new_version"]) == (0, 1)
    fixed, _ = run(tmp_path, """
        x = torch.randn(5, requires_grad=True)
        y = x.sigmoid()
        y = y * 2
        y.sum().backward()
    """)
    assert fixed["diagnostics"] == []


def test_graph_freed_names_the_first_backward(tmp_path):
    doc, lines = run(tmp_path, """
        w = torch.randn(4, 4, requires_grad=True)
        h = (w @ w).tanh()
        for i in range(3):
            loss = (h * (i + 1)).sum()
            loss.backward()
    """)
    d = only(doc, "graph-freed")
    assert (d["severity"], d["location"]["line"]) == ("error", line(lines, "loss.backward()"))
    roles = {r["role"]: r["location"]["line"] for r in d["related"]}
    assert roles["first backward ran here"] == line(lines, "loss.backward()")
    assert roles["graph built here"] == line(lines, "h = (w @ w)")
    assert {doc["nodes"][n]["op"] for n in d["nodes"]} == {"TanhBackward", "MmBackward"} or \
        "TanhBackward" in {doc["nodes"][n]["op"] for n in d["nodes"]}
    assert "retain_graph=True is seldom the right fix" in d["hint"]
    fixed, _ = run(tmp_path, """
        w = torch.randn(4, 4, requires_grad=True)
        for i in range(3):
            h = (w @ w).tanh()
            loss = (h * (i + 1)).sum()
            loss.backward()
    """)
    assert fixed["diagnostics"] == []


@pytest.mark.parametrize("cut,how", [
    ("h = h.detach()", "detach"),
    ("h = h.data", "data"),
    ("h = torch.from_numpy(h.detach().numpy())", "detach"),
])
def test_graph_cut_names_the_cut_and_the_parameters(tmp_path, cut, how):
    doc, lines = run(tmp_path, f"""
        model1 = nn.Linear(4, 4)
        model2 = nn.Linear(4, 1)
        opt = torch.optim.SGD(list(model1.parameters()) + list(model2.parameters()), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            h = model1(torch.randn(8, 4))
            {cut}
            loss = model2(h).pow(2).mean()
            loss.backward()
            opt.step()
    """)
    d = only(doc, "graph-cut")
    assert (d["severity"], d["location"]["line"]) == ("warning", line(lines, cut))
    names = sorted(doc["variables"][p]["name"] for p in d["details"]["parameters"])
    assert names == ["model1.bias", "model1.weight"]
    assert d["details"]["how"] == how
    assert d["details"]["why_none"]["cause"] == "cut"
    assert d["details"]["why_none"]["break"]["location"]["line"] == line(lines, cut)


def test_unused_parameter_and_fix(tmp_path):
    body = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(4, 8)
                self.fc2 = nn.Linear(8, 1)
            def forward(self, x):
                return {out}
        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(5, 4)).pow(2).mean().backward()
            opt.step()
    """
    doc, lines = run(tmp_path, body.format(out="self.fc1(x).sum(dim=1)"))
    d = only(doc, "unused-parameter")
    assert (d["severity"], d["location"]["line"]) == ("warning", line(lines, "self.fc2 = nn.Linear"))
    assert sorted(doc["variables"][v]["name"] for v in d["variables"]) == ["net.fc2.bias", "net.fc2.weight"]
    assert d["details"]["why_none"]["cause"] == "unreachable"
    fixed, _ = run(tmp_path, body.format(out="self.fc2(self.fc1(x))"))
    assert_clean(fixed)


@pytest.mark.parametrize("setup,cause", [
    ("with torch.no_grad():\n    out = model(x)", "no-grad-mode"),
    ("for p in model.parameters():\n    p.requires_grad = False\nout = model(x)", "requires-grad-false"),
])
def test_no_requires_grad_explains_why(tmp_path, setup, cause):
    doc, lines = run(tmp_path, "model = nn.Linear(3, 1)\nx = torch.randn(2, 3)\n" + setup +
                     "\nloss = out.sum()\nloss.backward()\n")
    d = only(doc, "no-requires-grad")
    assert (d["severity"], d["location"]["line"]) == ("error", line(lines, "loss.backward()"))
    assert d["variables"] == doc["backwards"][0]["roots"]
    assert d["details"]["why_none"]["cause"] == cause
    assert "`loss`" in d["message"]


def test_leaf_inplace(tmp_path):
    doc, lines = run(tmp_path, """
        w = torch.randn(3, requires_grad=True)
        w.add_(1)
    """)
    d = only(doc, "leaf-inplace")
    assert (d["severity"], d["location"]["line"]) == ("error", line(lines, "w.add_(1)"))
    fixed, _ = run(tmp_path, """
        w = torch.randn(3, requires_grad=True)
        with torch.no_grad():
            w.add_(1)
    """)
    assert fixed["diagnostics"] == []


def test_nan_inf_forward_and_backward(tmp_path):
    doc, lines = run(tmp_path, """
        p = torch.tensor([0.0, 0.5], requires_grad=True)
        q = p.log()
        loss = -q.sum()
        loss.backward()
    """)
    d = only(doc, "nan-inf")
    assert (d["severity"], d["location"]["line"]) == ("warning", line(lines, "p.log()"))
    assert doc["nodes"][d["nodes"][0]]["op"] == "LogBackward" and d["details"]["phase"] == "forward"
    doc, lines = run(tmp_path, """
        p = torch.tensor([0.0, 4.0], requires_grad=True)
        r = p.sqrt()
        r.sum().backward()
    """)
    d = only(doc, "nan-inf")
    assert (d["location"]["line"], d["details"]["phase"]) == (line(lines, "p.sqrt()"), "backward")
    assert doc["nodes"][d["nodes"][0]]["op"] == "SqrtBackward"
    fixed, _ = run(tmp_path, """
        p = torch.tensor([0.0, 0.5], requires_grad=True)
        (-p.clamp(min=1e-7).log().sum()).backward()
    """)
    assert fixed["diagnostics"] == []


def test_grad_accumulation_and_fixes(tmp_path):
    body = """
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(6, 3), torch.randn(6, 1)
        for _ in range(5):
            {reset}
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
    """
    doc, lines = run(tmp_path, body.format(reset="pass"))
    d = only(doc, "grad-accumulation")
    assert (d["severity"], d["location"]["line"]) == ("warning", line(lines, "loss.backward()"))
    assert sorted(doc["variables"][v]["name"] for v in d["variables"]) == ["model.bias", "model.weight"]
    assert {r["role"]: r["location"]["line"] for r in d["related"]}["previous optimizer step"] == \
        line(lines, "opt.step()")
    for reset in ("opt.zero_grad()", "model.zero_grad()", "model.zero_grad(set_to_none=False)",
                  "opt.zero_grad(set_to_none=False)",
                  "[p.grad.zero_() for p in model.parameters() if p.grad is not None]",
                  "[p.grad.data.zero_() for p in model.parameters() if p.grad is not None]"):
        fixed, _ = run(tmp_path, body.format(reset=reset))
        assert fixed["diagnostics"] == [], reset


def test_frozen_after_creation_but_still_given_to_the_optimizer_is_not_unused(tmp_path):
    doc, _ = run(tmp_path, """
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)   # every parameter, frozen ones included
        for p in model[0].parameters():
            p.requires_grad = False
        x, y = torch.randn(5, 4), torch.tensor([0, 1, 0, 1, 1])
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    """)
    assert doc["diagnostics"] == []
    first = [v for v in doc["variables"] if v["name"] in ("model.0.weight", "model.0.bias")]
    assert [(v["requires_grad"], v["requires_grad_final"]) for v in first] == [(True, False)] * 2


def test_step_between_retained_backward_and_another_backward_is_stale_at_the_step(tmp_path):
    doc, lines = run(tmp_path, """
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(torch.randn(5, 3)).pow(2).mean()
        loss.backward(retain_graph=True)
        opt.step()
        loss.backward()
    """)
    d = only(doc, "stale-version")
    assert (d["severity"], d["location"]["line"]) == ("error", line(lines, "opt.step()"))
    roles = {r["role"]: r["location"]["line"] for r in d["related"]}
    assert roles == {"saved here": line(lines, "loss = model("), "backward failed here": line(lines, "loss.backward()")}
    assert "`model.2.weight`" in d["message"] and "`opt.step()`" in d["message"]
    failed = doc["backwards"][-1]
    assert failed["error"]["code"] == "stale-version" and failed["location"]["line"] == line(lines, "loss.backward()")
    assert failed["error"]["node"] in d["nodes"]
    # without the second backward the retained graph is never used again: nothing is stale
    clean, _ = run(tmp_path, """
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(torch.randn(5, 3)).pow(2).mean()
        loss.backward(retain_graph=True)
        opt.step()
        del loss
    """)
    assert clean["diagnostics"] == []


def test_step_before_backward_is_predicted_before_the_backward_runs(tmp_path):
    doc, lines = run(tmp_path, """
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(5, 3)
        model(x).sum().backward()
        loss = model(x).pow(2).mean()
        opt.step()
    """)
    d = only(doc, "stale-version")
    assert (d["severity"], d["location"]["line"]) == ("warning", line(lines, "opt.step()"))
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {"saved here": line(lines, "loss = model(")}


def test_vanishing_grad_is_an_info(tmp_path):
    doc, lines = run(tmp_path, """
        l1, l2, l3 = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1)
        x = torch.randn(8, 4)
        loss = l3(l2(l1(x) * 1e-5)).pow(2).mean()
        loss.backward()
    """)
    codes = {(d["code"], d["severity"]) for d in doc["diagnostics"]}
    assert ("vanishing-grad", "info") in codes or ("exploding-grad", "info") in codes
    d = next(d for d in doc["diagnostics"] if d["code"] in ("vanishing-grad", "exploding-grad"))
    assert d["location"]["line"] == line(lines, "loss.backward()")
    assert d["details"]["layer"] in ("l1", "l2", "l3")


@pytest.mark.parametrize("body,name,cause", [
    ("w = torch.randn(3, requires_grad=True)\nh = w * 2\nh.sum().backward()", "h", "non-leaf"),
    ("w = torch.randn(3, requires_grad=True)\nu = torch.randn(3, requires_grad=True)\n(w * 2).sum().backward()",
     "u", "unreachable"),
    ("w = torch.randn(3, requires_grad=True)\nd = (w * 2).detach()\n(w * 3).sum().backward()", "d", "cut"),
    ("w = torch.randn(3, requires_grad=True)\nwith torch.no_grad():\n    n = w * 2\n(w * 3).sum().backward()",
     "n", "no-grad-mode"),
    ("w = torch.randn(3, requires_grad=True)\nf = torch.randn(3)\n(w * f).sum().backward()", "f",
     "requires-grad-false"),
    ("w = torch.randn(3, requires_grad=True)\nk = w.argmax()\n(w * 3).sum().backward()", "k",
     "non-differentiable"),
    ("w = torch.randn(3, requires_grad=True)\n(w * 3).sum().backward()", "w", "has-grad"),
])
def test_why_none_causes(tmp_path, body, name, cause):
    doc, lines = run(tmp_path, body + "\n")
    answer = gradviz.diagnose.why_none(doc, var(doc, name)["id"])
    assert answer["cause"] == cause, answer["message"]
    assert answer["variable"] == var(doc, name)["id"]
    assert set(answer) == {"variable", "cause", "message", "location", "break"}
    if cause != "has-grad":
        assert answer["break"]["kind"] and answer["location"] is not None


def test_why_none_volatile(tmp_path):
    doc, lines = run(tmp_path, """
        from gradviz.autograd import Variable
        model = nn.Linear(3, 1)
        out = model(Variable(torch.randn(2, 3), volatile=True))
    """)
    assert gradviz.diagnose.why_none(doc, var_at(doc, lines, "out = model")["id"])["cause"] == "volatile"


def test_why_none_through_the_trace(tmp_path):
    with gradviz.trace() as tr:
        w = gradviz.randn(3, requires_grad=True)
        h = w * 2
        h.sum().backward()
    answer = tr.why_none(h)
    assert answer["cause"] == "non-leaf"
    assert "retain_grad()" in answer["message"]
