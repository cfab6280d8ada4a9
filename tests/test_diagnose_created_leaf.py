"""A tensor created with requires_grad=True and transformed (`w = torch.randn(3, requires_grad=True) * 0.1`) is
not a leaf: none-grad and why_none say so and write the fix for the user's line; an optimizer given it raises
PyTorch's ValueError, which `optimize-non-leaf` explains at the optimizer's line. The generic case keeps its hint."""

import textwrap

import pytest

import gradviz
from gradviz.diagnose.fixes import leaf_after_ops

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PRELUDE = "import gradviz as torch\ntorch.manual_seed(0)\n"


def run(tmp_path, body):
    """Run PRELUDE + body as a script file under a trace, as `gradviz run` does; returns (doc, lines, tr)."""
    source = PRELUDE + textwrap.dedent(body)
    path = tmp_path / "script.py"
    path.write_text(source)
    tr = gradviz.trace()
    scope = {"__name__": "__main__", "__file__": str(path)}
    try:
        with tr:
            exec(compile(source, str(path), "exec"), scope)
    except (RuntimeError, ValueError):
        pass
    return tr.to_dict(), source.splitlines(), tr


def line(lines, marker):
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def only(doc, code):
    found = [d for d in doc["diagnostics"] if d["code"] == code]
    assert len(found) == 1, [(d["code"], d["message"]) for d in doc["diagnostics"]]
    return found[0]


SCALED = """\
w = torch.randn(3, requires_grad=True) * 0.1
x = torch.ones(3)
loss = (w * x).sum()
loss.backward()
print(w.grad)
"""


def test_none_grad_names_the_created_leaf_and_writes_the_fix(tmp_path):
    doc, lines, tr = run(tmp_path, SCALED)
    d = only(doc, "none-grad")
    made = line(lines, "w = torch.randn")
    assert d["severity"] == "warning"
    assert d["location"]["line"] == line(lines, "print(w.grad)")
    assert d["message"] == (
        f"`w.grad` is None: `w` (3,) is not a leaf. It is the output of MulBackward (n0) at line {made}, applied "
        "to a tensor created with requires_grad=True on the same line: that unnamed tensor is the leaf, backward "
        f"at line {line(lines, 'loss.backward()')} put the gradient there, and `w` keeps none (an optimizer given "
        "it refuses it: can't optimize a non-leaf Tensor).")
    assert d["hint"] == (
        f"Make `w` itself the leaf: write line {made} as `w = (torch.randn(3) * 0.1).requires_grad_()`, or create "
        "it then scale it under no_grad: `w = torch.randn(3, requires_grad=True)` then "
        "`with torch.no_grad(): w.mul_(0.1)`. (gradviz explain none-grad)")
    why = d["details"]["why_none"]
    assert why["cause"] == "created-then-transformed"
    leaf = doc["variables"][why["break"]["variable"]]
    assert leaf["origin"] == "factory" and leaf["is_leaf"] and leaf["location"]["line"] == made
    assert why["location"]["line"] == made


def test_why_none_answers_the_same_live(tmp_path):
    doc, lines, tr = run(tmp_path, SCALED)
    w = next(v for v in doc["variables"] if v["name"] == "w")
    answer = gradviz.diagnose.why_none(doc, w["id"])
    assert answer["cause"] == "created-then-transformed"
    assert answer["message"].startswith("`w` (3,) is not a leaf: it is the output of MulBackward (n0) at line "
                                        f"{line(lines, 'w = torch.randn')}, applied to a tensor created with "
                                        "requires_grad=True on the same line.")
    leaf = doc["variables"][answer["break"]["variable"]]
    assert answer["break"]["node"] == w["node"]
    assert answer["break"]["edge"] == [w["node"], leaf["accumulator"]]
    assert leaf["is_leaf"] and leaf["origin"] == "factory"


def test_the_fixes_it_writes_are_leaves_with_the_gradient(tmp_path):
    for fixed in ("w = (torch.randn(3) * 0.1).requires_grad_()\n",
                  "w = torch.randn(3, requires_grad=True)\nwith torch.no_grad():\n    w.mul_(0.1)\n"):
        doc, lines, tr = run(tmp_path, fixed + SCALED.split("\n", 1)[1])
        assert [d["code"] for d in doc["diagnostics"]] == []


def test_rebinding_the_name_is_the_same_mistake(tmp_path):
    doc, lines, tr = run(tmp_path, """\
        w = torch.zeros(2, 3, requires_grad=True)
        w = w.t()
        w.sum().backward()
        print(w.grad)
        """)
    d = only(doc, "none-grad")
    assert d["details"]["why_none"]["cause"] == "created-then-transformed"
    assert (f"applied to a tensor created with requires_grad=True at line {line(lines, 'torch.zeros')}: that "
            "tensor (the name `w` now holds the result) is the leaf") in d["message"]
    assert d["hint"] == (f"Make `w` itself the leaf: create the tensor at line {line(lines, 'torch.zeros')} "
                         f"without requires_grad=True and write line {line(lines, 'w = w.t()')} as "
                         "`w = w.t().requires_grad_()`; or keep requires_grad=True and apply the ops in place under "
                         "`torch.no_grad()`. (gradviz explain none-grad)")


def test_generic_non_leaf_keeps_the_chain_the_models_hint(tmp_path):
    doc, lines, tr = run(tmp_path, """\
        x = torch.randn(3, requires_grad=True)
        y = x * 2
        y.sum().backward()
        print(y.grad)
        """)
    d = only(doc, "none-grad")
    assert d["details"]["why_none"]["cause"] == "non-leaf"
    assert d["hint"].startswith("Chain the models and call backward once on the loss")
    assert d["location"]["line"] == line(lines, "print(y.grad)")


def test_a_model_output_on_a_created_input_is_the_generic_case(tmp_path):
    doc, lines, tr = run(tmp_path, """\
        import gradviz.nn as nn
        model = nn.Linear(3, 2)
        h = model(torch.randn(4, 3, requires_grad=True))
        h.sum().backward()
        print(h.grad)
        """)
    assert only(doc, "none-grad")["details"]["why_none"]["cause"] == "non-leaf"


SCALED_OPTIMIZED = """\
w = torch.randn(3, requires_grad=True) * 0.1
opt = torch.optim.SGD([w], lr=0.1)
"""


def test_optimizer_refuses_it_and_the_diagnostic_says_so_at_the_optimizer_line(tmp_path):
    doc, lines, tr = run(tmp_path, SCALED_OPTIMIZED)
    assert doc["status"]["exception"]["type"] == "ValueError"
    d = only(doc, "optimize-non-leaf")
    made = line(lines, "w = torch.randn")
    assert d["severity"] == "error"
    assert d["location"]["line"] == line(lines, "opt = torch.optim.SGD")
    assert d["message"] == (
        f"the optimizer at line {made + 1} was given `w`, which is not a leaf (can't optimize a non-leaf Tensor): "
        f"it is the output of MulBackward (n0) at line {made}, applied to a tensor created with "
        "requires_grad=True on the same line. That tensor is the leaf backward would fill; `w.grad` would always "
        "be None.")
    assert d["hint"] == (
        f"Make `w` itself the leaf: write line {made} as `w = (torch.randn(3) * 0.1).requires_grad_()`, or create "
        "it then scale it under no_grad: `w = torch.randn(3, requires_grad=True)` then "
        "`with torch.no_grad(): w.mul_(0.1)`. (gradviz explain optimize-non-leaf)")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {"created here": made,
                                                                        "leaf created here": made}


def test_optimizer_given_any_non_leaf_gets_the_generic_advice(tmp_path):
    doc, lines, tr = run(tmp_path, """\
        import gradviz.nn as nn
        model = nn.Linear(3, 2)
        scaled = model.weight * 2
        opt = torch.optim.Adam([scaled])
        """)
    d = only(doc, "optimize-non-leaf")
    assert d["location"]["line"] == line(lines, "opt = torch.optim.Adam")
    assert d["hint"].startswith("Give the optimizer the leaves `scaled` is computed from")


def _optimizer_classes(module):
    return [c for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, module.Optimizer) and c is not module.Optimizer]


@pytest.mark.oracle
def test_every_optimizer_refuses_a_non_leaf_as_pytorch_does():
    torch = pytest.importorskip("torch")
    classes = _optimizer_classes(gradviz.optim)
    assert classes
    for cls in classes:
        ours = gradviz.randn(3, requires_grad=True) * 0.1
        theirs = torch.randn(3, requires_grad=True) * 0.1
        with pytest.raises(ValueError) as mine:
            cls([ours], lr=0.1)
        with pytest.raises(ValueError) as reference:
            getattr(torch.optim, cls.__name__)([theirs], lr=0.1)
        assert str(mine.value) == str(reference.value) == "can't optimize a non-leaf Tensor"


@pytest.mark.parametrize("text, fix, no_grad", [
    ("w = torch.randn(3, requires_grad=True) * 0.1", "w = (torch.randn(3) * 0.1).requires_grad_()",
     ("w = torch.randn(3, requires_grad=True)", "w.mul_(0.1)")),
    ("w = 0.1 * torch.randn(3, requires_grad=True)  # small", "w = (0.1 * torch.randn(3)).requires_grad_()",
     ("w = torch.randn(3, requires_grad=True)", "w.mul_(0.1)")),
    ("self.b = torch.zeros(4, requires_grad=True, dtype=torch.float64) - 1",
     "self.b = (torch.zeros(4, dtype=torch.float64) - 1).requires_grad_()",
     ("self.b = torch.zeros(4, requires_grad=True, dtype=torch.float64)", "self.b.sub_(1)")),
    ("w = torch.tensor([1.0, 2.0], requires_grad=True).view(2, 1)",
     "w = torch.tensor([1.0, 2.0]).view(2, 1).requires_grad_()", None),
    ("w = torch.randn(3, requires_grad=True) / scale(2)", "w = (torch.randn(3) / scale(2)).requires_grad_()", None),
])
def test_the_fix_is_written_for_the_users_expression(text, fix, no_grad):
    assert leaf_after_ops(text) == {"requires_grad_": fix, "no_grad": no_grad}


@pytest.mark.parametrize("text", ["w = torch.randn(3, requires_grad=True)", "w = torch.randn(3) * 0.1",
                                  "w = (torch.randn(3,", "f(torch.randn(3, requires_grad=True) * 2)",
                                  "w = a(requires_grad=True) + b(requires_grad=True)"])
def test_no_rewrite_when_the_line_is_not_the_simple_shape(text):
    assert leaf_after_ops(text) is None
