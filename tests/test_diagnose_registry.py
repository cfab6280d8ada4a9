"""Rules that register themselves: a module in ``gradviz/diagnose/rules/`` is all a diagnostic needs. diagnose()
runs what the registry holds and nothing else, ``gradviz explain`` lists it, docs/diagnostics.md documents it, and
every code is declared once, with an explanation that shows the mistake and the fix."""

import sys

import pytest
from click.testing import CliRunner

import gradviz
import gradviz.diagnose.rules as rules_package
from gradviz.cli import main
from gradviz.diagnose import CODES, diagnose, explain, registry
from gradviz.diagnose.ddp_rules import diagnose_job
from gradviz.diagnose.page import markdown

pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute:UserWarning")

DROPPED = '''\
from gradviz.diagnose.registry import Code, rule

DEMO = Code("demo-dropped-in", "info", "a rule module dropped into the package", """\\
Reported at every backward call: it only shows that a module dropped into the rules package is picked up.

The mistake:

    loss.backward()

The fix: none needed.
""")


@rule(DEMO, order={order})
def demo_dropped_in(ctx, out):
    for b in ctx.index.backwards:
        out.add("demo-dropped-in", f"backward {{b['id']}} seen ({{len(ctx.shared)}} facts shared before)",
                "Nothing to do.", b.get("location"), order=(9, b["id"]))
'''


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry as it is, restored afterwards (codes and rules a test registers are forgotten)."""
    monkeypatch.setattr(registry, "RULES", list(registry.RULES))
    codes = dict(registry.CODES)
    modules = set(sys.modules)
    yield
    registry.CODES.clear()
    registry.CODES.update(codes)
    for name in set(sys.modules) - modules:
        if name.startswith("gradviz.diagnose.rules."):
            del sys.modules[name]


def drop_rule_module(tmp_path, monkeypatch, order=100):
    folder = tmp_path / "more_rules"
    folder.mkdir()
    (folder / "demo_dropped_in.py").write_text(DROPPED.format(order=order))
    monkeypatch.setattr(rules_package, "__path__", [*rules_package.__path__, str(folder)])


def one_backward_doc():
    tr = gradviz.trace(engine="gradviz")
    with tr:
        x = gradviz.tensor([1.0, 2.0], requires_grad=True)
        (x * 2).sum().backward()
    return tr.to_dict()


def test_a_module_dropped_into_the_rules_package_is_run_listed_and_documented(tmp_path, monkeypatch,
                                                                              scratch_registry):
    doc = one_backward_doc()
    assert diagnose(doc) == []
    assert "demo-dropped-in" not in CODES
    drop_rule_module(tmp_path, monkeypatch)

    [found] = diagnose(doc)
    assert (found["code"], found["severity"]) == ("demo-dropped-in", "info")
    assert found["message"] == f"backward {doc['backwards'][0]['id']} seen (1 facts shared before)"
    assert found["hint"] == "Nothing to do. (gradviz explain demo-dropped-in)"
    assert found["location"] == doc["backwards"][0]["location"]
    # the catalogue: after every code whose rule runs earlier (order 100 comes after the built-in rules)
    assert list(CODES)[-1] == "demo-dropped-in"
    assert CODES["demo-dropped-in"] == ("info", "a rule module dropped into the package")
    listed = CliRunner(env={"COLUMNS": "250"}).invoke(main, ["explain"])
    assert listed.exit_code == 0
    rows = [line.rstrip().split(None, 2) for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert ["demo-dropped-in", "info", "a rule module dropped into the package"] in rows
    shown = CliRunner().invoke(main, ["explain", "demo-dropped-in"])
    assert shown.stdout == explain("demo-dropped-in")
    assert shown.stdout.startswith("demo-dropped-in (info): a rule module dropped into the package\n\nReported at")
    page = markdown()
    assert "| [`demo-dropped-in`](#demo-dropped-in) | info | a rule module dropped into the package |" in page
    assert "\n## demo-dropped-in\n\n**info** — a rule module dropped into the package.\n" in page
    assert "```python\nloss.backward()\n```" in page


def test_a_rules_order_places_it_in_the_run_and_in_the_catalogue(tmp_path, monkeypatch, scratch_registry):
    drop_rule_module(tmp_path, monkeypatch, order=1)
    doc = one_backward_doc()
    [found] = diagnose(doc)
    assert found["message"].endswith("(0 facts shared before)")  # it runs before none-grad shares its keys
    assert list(CODES)[0] == "demo-dropped-in"
    assert markdown().index("## demo-dropped-in") < markdown().index("## none-grad")


def test_diagnose_runs_the_registered_rules_and_nothing_else(monkeypatch):
    tr = gradviz.trace(engine="gradviz")
    with tr:
        w = gradviz.tensor([1.0, 2.0], requires_grad=True)
        y = w * 3
        y.sum().backward()
        y.grad  # noqa: B018 - a non-leaf's .grad: none-grad
    doc = tr.to_dict()
    assert [d["code"] for d in diagnose(doc)] == ["none-grad"]
    monkeypatch.setattr(registry, "RULES", [r for r in registry.RULES if r.name != "none_grad"])
    assert diagnose(doc) == []


def test_a_job_rule_runs_over_every_rank_in_rank_order(scratch_registry):
    code = registry.Code("demo-job", "info", "a job rule", "Shown once.\n\n    x\n\nThe fix: none.\n")
    seen = []

    @registry.rule(code, scope="job")
    def demo_job(ctx, out):
        seen.append((ctx.doc, ctx.index, ctx.ranks, [d["process"]["rank"] for d in ctx.docs]))
        out.add("demo-job", f"{len(ctx.docs)} ranks", "None.", None, details={"ranks": list(ctx.ranks)})

    assert demo_job not in [r.function for r in registry.rules("process")]
    found = diagnose_job([{"process": {"rank": 1}}, {"process": {"rank": 0}}])
    assert seen == [(None, None, (0, 1), [0, 1])]
    assert [(d["code"], d["message"], d["details"]) for d in found] == [("demo-job", "2 ranks", {"ranks": [0, 1]})]


def test_every_code_has_an_explanation_with_an_example_and_a_fix_and_a_rule_that_reports_it():
    reported = {c.code for r in registry.RULES for c in r.codes}
    for code, entry in registry.CODES.items():
        assert entry.title and not entry.title.endswith(".")
        assert "\n    " in entry.explanation, f"{code}: a minimal example, indented as code"
        assert "fix" in entry.explanation.lower(), f"{code}: the fix"
        assert code in reported, f"{code}: no rule reports it"
    for r in registry.RULES:
        assert all(registry.CODES[c.code] is c for c in r.codes), r.name


def test_each_code_is_declared_once_in_one_rule_module():
    declared = {}
    for name, module in sys.modules.items():
        if name.startswith("gradviz.diagnose.rules."):
            for value in vars(module).values():
                if isinstance(value, registry.Code) and getattr(module, "__name__", "") == name:
                    declared.setdefault(value.code, set()).add(name)
    assert set(declared) >= set(registry.CODES) - {"demo-dropped-in", "demo-job"}
    assert {code: mods for code, mods in declared.items() if len(mods) > 1} == {}


def test_a_code_registered_twice_with_another_entry_is_refused(scratch_registry):
    entry = registry.CODES["none-grad"]
    assert registry.Code(entry.code, entry.severity, entry.title, entry.explanation) == entry  # (a re-import)
    with pytest.raises(ValueError, match="diagnostic code 'none-grad' registered twice"):
        registry.Code("none-grad", "error", "something else", "An explanation.\n\n    x\n\nThe fix.\n")
    assert registry.CODES["none-grad"] is entry
    with pytest.raises(ValueError, match="unknown severity 'fatal'"):
        registry.Code("demo-fatal", "fatal", "t", "e")
    with pytest.raises(TypeError, match="rule codes are Code entries"):
        registry.rule("none-grad")


def test_the_catalogue_keeps_its_order_and_its_rules_their_run_order():
    first = ["none-grad", "nonscalar-backward", "stale-version", "silent-inplace", "graph-freed", "retained-graph",
             "graph-cut", "unused-parameter", "no-requires-grad", "leaf-inplace", "optimize-non-leaf",
             "volatile-deprecated", "nan-inf", "grad-accumulation", "exploding-grad", "vanishing-grad",
             "wrong-backward", "ddp-unused-parameters", "ddp-divergent-graph", "ddp-accumulate-without-no-sync",
             "ddp-grad-mismatch"]  # docs/diagnostics.md's order since these codes were written
    assert [c for c in CODES if c in first] == first
    process = [r.name for r in registry.rules("process")]
    assert process.index("none_grad") < process.index("nonscalar_backward")  # it links to none-grad's keys
    job = [r.name for r in registry.rules("job")]
    assert job.index("ddp_unused_parameters") < job.index("ddp_divergent_graph")  # likewise
