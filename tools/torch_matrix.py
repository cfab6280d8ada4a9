"""Run gradviz's torch path on several torch versions, one venv each, and print a table.

    python tools/torch_matrix.py                         # 2.4.1 2.9.1 2.13.0 2.14.1 and the newest on the index
    python tools/torch_matrix.py 2.13.0 2.14.1           # these versions only
    python tools/torch_matrix.py 2.13.0=/work/venv 2.14.1=/work/venv214   # venvs that already have that torch

For each version: a venv under --venvs (made once, reused after), with torch==VERSION and this checkout's test
dependencies installed from one shared pip cache (--pip-cache); a VERSION=PATH argument uses an existing venv
instead and installs nothing. Then, with this checkout first on PYTHONPATH (the code under test is this one):

- the torch-path tests (tests/test_torch_*.py, test_cli_engine.py, test_diagnose_torch_sample.py,
  test_backward_check_torch.py), counted from pytest's JUnit XML;
- every real-PyTorch script (tests/torch_scripts/*.py and the samples that import torch) under
  ``gradviz run --engine torch --json-only``, reduced to its diagnostics (code, line), its graphs, nodes and
  backward calls, and its memory figures, compared with the same script on the reference version (--reference,
  2.13.0: the oracle the tests are written against).

Each run's facts go to --out (JSON per version), so a later run can compare against them. A CPU machine can take
torch's CPU wheels with --cpu (the download.pytorch.org CPU index); without it pip takes the index's default
wheel (CUDA on Linux), several GB per version.
"""

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "gradviz-torch-matrix"  # venvs and results, outside the checkout
DEFAULT = ["2.4.1", "2.9.1", "2.13.0", "2.14.1", "newest"]
TEST_FILES = ["tests/test_cli_engine.py", "tests/test_diagnose_torch_sample.py", "tests/test_backward_check_torch.py"]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def main(argv=None):
    args = parse(argv)
    runs = [parse_version(v) for v in args.versions]
    if any(v == "newest" for v, _ in runs):
        runs = [(newest_on_index() if v == "newest" else v, path) for v, path in runs]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for version, venv in runs:
        python = Path(venv) / "bin" / "python" if venv else make_venv(version, Path(args.venvs), args)
        if python is None:
            results[version] = {"error": "venv could not be made (see above)"}
            continue
        print(f"== torch {version}: {python}", file=sys.stderr, flush=True)
        result = run_version(python, out / version, args)
        (out / f"{version}.json").write_text(json.dumps(result, indent=1))
        results[version] = result
    reference = results.get(args.reference)
    if reference is None and (out / f"{args.reference}.json").exists():
        reference = json.loads((out / f"{args.reference}.json").read_text())
    print(table(results, reference, args.reference))
    failed = any(r.get("error") or r["tests"]["failed"] or r["tests"]["errors"] for r in results.values())
    return 1 if failed else 0


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("versions", nargs="*", default=DEFAULT,
                   help="torch versions (VERSION or VERSION=existing venv); 'newest' asks the index")
    p.add_argument("--venvs", default=str(CACHE / "venvs"), help="where the venvs are made")
    p.add_argument("--pip-cache", default=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
                   help="pip's cache, shared by every venv")
    p.add_argument("--out", default=str(CACHE / "results"), help="per-version facts (JSON)")
    p.add_argument("--reference", default="2.13.0", help="the version the samples are compared with")
    p.add_argument("--cpu", action="store_true", help="install torch's CPU wheels")
    p.add_argument("--python", default=sys.executable, help="the interpreter the venvs are made from")
    return p.parse_args(argv)


def parse_version(text):
    version, _, path = text.partition("=")
    return version, (path or None)


def newest_on_index():
    """The newest torch release pip sees (one query for the one package this tool installs)."""
    found = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch"], capture_output=True,
                           text=True)
    first = found.stdout.splitlines()[0] if found.returncode == 0 and found.stdout else ""
    if "(" not in first:
        raise SystemExit(f"torch_matrix: could not ask the index for torch's newest version: {found.stderr.strip()}")
    return first.split("(")[1].split(")")[0]


def make_venv(version, root, args):
    venv = root / f"torch-{version}"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return python
    subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--cache-dir", args.pip_cache]
    if args.cpu:
        pip += ["--index-url", CPU_INDEX, "--extra-index-url", "https://pypi.org/simple"]
    # the project's own dependencies and test tools, and exactly this torch (the oracle extra pins another)
    done = subprocess.run(pip + [f"torch=={version}", "-e", f"{REPO}[test]"])
    if done.returncode != 0:
        print(f"torch_matrix: installing torch {version} failed", file=sys.stderr)
        return None
    marker.write_text(version)
    return python


def env_for():
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def torch_test_files():
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_torch_*.py")) + TEST_FILES


def torch_scripts():
    found = sorted((REPO / "tests" / "torch_scripts").glob("*.py"))
    for sample in sorted((REPO / "samples").glob("*.py")):
        text = sample.read_text()
        if "\nimport torch" in "\n" + text or "\nfrom torch" in "\n" + text:
            found.append(sample)
    return found


def run_version(python, folder, args):
    folder.mkdir(parents=True, exist_ok=True)
    env = env_for()
    version = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, env=env)
    if version.returncode != 0:
        return {"error": f"import torch failed: {version.stderr.strip().splitlines()[-1:]}"}
    junit = folder / "tests.xml"
    subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                    f"--junitxml={junit}", *torch_test_files()], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return {"torch": version.stdout.strip(), "tests": count_tests(junit),
            "samples": {str(s.relative_to(REPO)): sample_facts(python, s, env) for s in torch_scripts()}}


def count_tests(junit):
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failures": []}
    if not junit.exists():
        counts["errors"] = 1
        counts["failures"].append("pytest wrote no report")
        return counts
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
            counts["failures"].append(name)
        elif case.find("error") is not None:
            counts["errors"] += 1
            counts["failures"].append(name)
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def sample_facts(python, script, env):
    """What the matrix compares across versions: diagnostics at their lines, graph counts, memory figures."""
    run = subprocess.run([str(python), "-m", "gradviz", "run", "--engine", "torch", "--json-only", str(script)],
                         capture_output=True, text=True, env=env, cwd=REPO)
    try:
        doc = json.loads(run.stdout)
    except ValueError:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {run.returncode}: {last}"}
    memory = doc.get("memory") or {}
    return {
        "diagnostics": sorted([d["code"], (d.get("location") or {}).get("line")] for d in doc["diagnostics"]),
        "graphs": len(doc.get("graphs", [])),
        "nodes": len(doc.get("nodes", [])),
        "backwards": len(doc.get("backwards", [])),
        "peak_retained_bytes": memory.get("peak_retained_bytes"),
        "final_retained_bytes": memory.get("final_retained_bytes"),
        "internal_errors": len(doc.get("internal_errors", [])),
        "unseen": [u["what"] for u in doc.get("unseen", [])],
    }


def table(results, reference, reference_version):
    rows = [("torch", "tests passed", "failed", "errors", "skipped", f"samples as on {reference_version}")]
    notes = []
    for version, r in results.items():
        if r.get("error"):
            rows.append((version, "-", "-", "-", "-", r["error"]))
            continue
        t = r["tests"]
        if reference is None or reference.get("error"):
            same = "no reference run"
        else:
            differ = [name for name, facts in r["samples"].items() if facts != reference["samples"].get(name)]
            same = f"{len(r['samples']) - len(differ)}/{len(r['samples'])}"
            notes += [f"{version}: {name} differs: {diff(r['samples'][name], reference['samples'].get(name))}"
                      for name in differ]
        rows.append((f"{version} ({r['torch']})", str(t["passed"]), str(t["failed"]), str(t["errors"]),
                     str(t["skipped"]), same))
        notes += [f"{version}: failed {name}" for name in t["failures"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines + [""] + notes)


def diff(mine, theirs):
    if theirs is None:
        return "not run on the reference"
    return ", ".join(f"{k} {mine.get(k)!r} (reference {theirs.get(k)!r})" for k in sorted(set(mine) | set(theirs))
                     if mine.get(k) != theirs.get(k))


if __name__ == "__main__":
    sys.exit(main())
