"""``gradviz run -m MODULE``: the module runs as ``python -m MODULE`` runs it (``sys.path[0]``, ``__main__``,
``__spec__``, ``__package__``, ``sys.argv``), relative imports work, and the report and traceback point at the
package's own files. The commands run as users run them: the installed ``gradviz`` script in a fresh process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from gradviz.cli import main

from .marked_lines import marked_line

GRADVIZ = os.path.join(os.path.dirname(sys.executable), "gradviz")
needs_script = pytest.mark.skipif(not os.path.exists(GRADVIZ), reason="the gradviz console script is not installed")

PROBE = """\
import json, sys
from . import helper  # a relative import: needs __package__ / __spec__

main = sys.modules["__main__"]
state = {
    "path0": sys.path[0], "name": __name__, "spec": __spec__.name, "spec_origin": __spec__.origin,
    "package": __package__, "file": __file__, "argv": sys.argv, "loader": type(__loader__).__name__,
    "cached": globals().get("__cached__"), "main_spec": main.__spec__.name, "main_is_us": vars(main) is globals(),
    "helper": helper.WHO,
}
with open(sys.argv[1], "w") as f:
    json.dump(state, f)
"""

MODEL = """\
import gradviz as torch

WHO = "the package's helper"


def make_weight():
    return torch.randn(3, requires_grad=True) * 0.1  # the weight is made here, a non-leaf


def fail():
    raise ValueError("bad shapes")  # the package's own line that raises
"""

TRAIN = """\
from .helper import make_weight

w = make_weight()
loss = (w * 2).sum()
loss.backward()
print("grad:", w.grad)  # planted: .grad of a non-leaf, read on the first (only) step
"""

BOOM = """\
from .helper import fail


def main():
    fail()  # the call into the package


main()
"""


def make_package(root, name="mypkg", main_module=None):
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text(MODEL)
    (package / "probe.py").write_text(PROBE)
    (package / "train.py").write_text(TRAIN)
    (package / "boom.py").write_text(BOOM)
    if main_module is not None:
        (package / "__main__.py").write_text(main_module)
    return package


def gradviz(cwd, *args):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="", TMPDIR=str(cwd))  # torchelastic's leftovers go with cwd
    env.pop("PYTHONPATH", None)
    return subprocess.run([GRADVIZ, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@needs_script
def test_the_module_sees_what_python_m_gives_it(tmp_path):
    make_package(tmp_path)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    plain = subprocess.run([sys.executable, "-m", "mypkg.probe", "python.json", "--lr", "1"], cwd=tmp_path,
                           capture_output=True, text=True, env=env)
    assert plain.returncode == 0, plain.stderr
    traced = gradviz(tmp_path, "run", "-q", "--no-render", "-m", "mypkg.probe", "gradviz.json", "--lr", "1")
    assert traced.returncode == 0, traced.stderr
    expected = json.loads((tmp_path / "python.json").read_text())
    got = json.loads((tmp_path / "gradviz.json").read_text())
    got["argv"][1] = expected["argv"][1] = "<out>"  # the file each run was told to write
    assert got == expected
    assert expected["path0"] == str(tmp_path) and expected["spec"] == "mypkg.probe"  # what is compared, named
    assert (tmp_path / "gradviz-out" / "mypkg.probe" / "report.json").exists()


@needs_script
def test_a_package_runs_its_main_module(tmp_path):
    make_package(tmp_path, main_module="import sys\nprint('main of', __spec__.name, __package__, sys.argv[1:])\n")
    traced = gradviz(tmp_path, "run", "-q", "--no-render", "-m", "mypkg", "x")
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == "main of mypkg.__main__ mypkg ['x']\n"


@needs_script
def test_the_diagnostic_points_at_the_packages_lines(tmp_path):
    package = make_package(tmp_path)
    traced = gradviz(tmp_path, "run", "--no-render", "--fail-on", "never", "-m", "mypkg.train")
    assert traced.returncode == 0, traced.stderr
    doc = json.loads((tmp_path / "gradviz-out" / "mypkg.train" / "report.json").read_text())
    train, helper = str(package / "train.py"), str(package / "helper.py")
    assert doc["script"] == train
    found = [(d["code"], d["location"]["file"], d["location"]["line"]) for d in doc["diagnostics"]]
    assert found == [("none-grad", train, marked_line(train, "# planted"))]
    related = {(r["location"]["file"], r["location"]["line"]) for r in doc["diagnostics"][0]["related"]}
    assert (helper, marked_line(helper, "# the weight is made here")) in related


@needs_script
def test_the_traceback_shows_the_packages_files(tmp_path):
    package = make_package(tmp_path)
    traced = gradviz(tmp_path, "run", "--no-render", "-m", "mypkg.boom")
    assert traced.returncode == 1
    boom, helper = str(package / "boom.py"), str(package / "helper.py")
    assert f'File "{boom}", line {marked_line(boom, "# the call into the package")}, in main' in traced.stderr
    assert f'File "{helper}", line {marked_line(helper, "# the package")}, in fail' in traced.stderr
    assert "ValueError: bad shapes" in traced.stderr
    assert "gradviz/cli" not in traced.stderr and "runpy" not in traced.stderr
    doc = json.loads((tmp_path / "gradviz-out" / "mypkg.boom" / "report.json").read_text())
    assert doc["status"]["exception"]["location"]["file"] == helper


@pytest.mark.parametrize("args, message", [
    (["-m", "gvnosuch.train"], "no module named `gvnosuch.train` (looked for from `{cwd}`, as `python -m` does)"),
    (["-m", "gvplain"], "`gvplain` is a package without a `__main__` module: it cannot be run with -m"),
    (["-m", ".train"], "`.train` is a relative module name: -m takes an absolute one (`package.module`)"),
    (["-m", "gvbroken.train"], "-m gvbroken.train: importing `gvbroken` raised RuntimeError: init fails"),
    (["-m", "gvsyntax.bad"], "syntax error in `{cwd}/gvsyntax/bad.py:1`: invalid syntax"),
])
def test_a_module_that_cannot_run_is_one_line(args, message, tmp_path, monkeypatch):
    for name in ("gvplain", "gvbroken", "gvsyntax"):
        (tmp_path / name).mkdir()
    (tmp_path / "gvplain" / "__init__.py").write_text("")
    (tmp_path / "gvbroken" / "__init__.py").write_text("raise RuntimeError('init fails')\n")
    (tmp_path / "gvsyntax" / "__init__.py").write_text("")
    (tmp_path / "gvsyntax" / "bad.py").write_text(textwrap.dedent("x = = 1\n"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in list(sys.modules):
        if name.startswith(("gvplain", "gvbroken", "gvsyntax")):
            monkeypatch.delitem(sys.modules, name)
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 1
    assert result.stderr == f"gradviz: error: {message.format(cwd=tmp_path)}\n"
    assert not (tmp_path / "gradviz-out").exists()


TORCH_HELPER = """\
import torch


def make_weight():
    return torch.randn(3, requires_grad=True) * 0.1  # the weight is made here, a non-leaf
"""

TORCH_TRAIN = """\
import os
import sys

from .helper import make_weight

w = make_weight()
(w * 2).sum().backward()
print("rank", os.environ["RANK"], sys.argv[1:], w.grad)  # planted: .grad of a non-leaf
"""


@needs_script
@pytest.mark.oracle
def test_torchrun_m_runs_the_module_on_each_rank(tmp_path):
    pytest.importorskip("torch")
    package = tmp_path / "rankpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text(TORCH_HELPER)
    (package / "train.py").write_text(TORCH_TRAIN)
    job = gradviz(tmp_path, "torchrun", "--no-render", "--fail-on", "never", "--standalone", "--nproc-per-node", "1",
                  "-m", "rankpkg.train", "--lr", "1")
    assert job.returncode == 0, job.stderr
    assert "rank 0 ['--lr', '1'] None" in job.stdout
    doc = json.loads((tmp_path / "gradviz-out" / "rankpkg.train" / "report.json").read_text())
    train = str(package / "train.py")
    assert [(d["code"], d["location"]["file"], d["location"]["line"]) for d in doc["diagnostics"]] == [
        ("none-grad", train, marked_line(train, "# planted"))]


@needs_script
@pytest.mark.oracle
def test_torchrun_sarif_holds_the_jobs_diagnostics(tmp_path):
    pytest.importorskip("torch")
    package = tmp_path / "rankpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text(TORCH_HELPER)
    (package / "train.py").write_text(TORCH_TRAIN)
    job = gradviz(tmp_path, "torchrun", "--no-render", "--fail-on", "never", "--sarif", "job.sarif", "--standalone",
                  "--nproc-per-node", "1", "-m", "rankpkg.train")
    assert job.returncode == 0, job.stderr
    assert "Wrote SARIF to job.sarif" in job.stdout
    [result] = json.loads((tmp_path / "job.sarif").read_text())["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert result["ruleId"] == "none-grad"
    assert (location["artifactLocation"]["uri"], location["region"]["startLine"]) == (
        "rankpkg/train.py", marked_line(str(package / "train.py"), "# planted"))
