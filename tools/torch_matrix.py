"""Run gradviz's torch path on several torch versions, one venv each, and say where they differ.

    python tools/torch_matrix.py                          # 2.4.1 2.9.1 2.13.0 2.14.1 2.15.0, venvs made once
    python tools/torch_matrix.py 2.13.0 2.15.0            # these versions only
    python tools/torch_matrix.py 2.13.0=/work/venv        # a venv that already has that torch (nothing installed)
    python tools/torch_matrix.py --venvs /work/venvs --jobs 2
    python tools/torch_matrix.py --venvs /work/venvs --from-results   # judge the last run's facts again

For each version: a venv under --venvs (made once, reused after; keep it outside any checkout), with exactly
torch==VERSION and this checkout's test dependencies from the usual package index. A machine whose pip config caps
torch (a ``constraint`` file) would refuse a newer one: the install gets a pin file of its own as pip's
constraint (``PIP_CONSTRAINT``, which takes the config's place; an empty value would not), holding
``torch==VERSION``. Then, with this checkout first on PYTHONPATH (the code under test is this one):

- the torch-path tests (tests/test_torch_*.py, test_cli_engine.py, test_diagnose_torch_sample.py,
  test_backward_check_torch.py), counted from pytest's JUnit XML: passed, failed, errors, skipped;
- every real-PyTorch script (tests/torch_scripts/*.py and the samples that import torch) under
  ``gradviz run --engine torch --json-only``, reduced to its facts: diagnostics (code, line), graph, node and
  backward counts, memory figures, internal errors, ``unseen`` entries; compared with the same script on the
  reference version (--reference, 2.13.0: the oracle the tests are written against).

A fact that differs from the reference is explained only by ``KNOWN``: a real difference between PyTorch lines,
each with its reason. The exit status is 1 when any test fails or errors, a script cannot be run, or a fact
differs without an explanation (or there is no reference to compare with); 0 otherwise. Each version's facts go to
--out as JSON, so a later run can compare against a reference run before.
"""

import argparse
import datetime
import getpass
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "gradviz-torch-matrix"  # venvs and results, outside the checkout
DEFAULT = ["2.4.1", "2.9.1", "2.13.0", "2.14.1", "2.15.0"]
TEST_FILES = ["tests/test_cli_engine.py", "tests/test_diagnose_torch_sample.py", "tests/test_backward_check_torch.py",
              "tests/test_light_sees_everything.py"]

# Real differences between PyTorch lines, not gradviz's: (the torch versions it holds on, the script, the facts that
# differ there, why). A difference on any other version, script or fact is unexplained.
Known = namedtuple("Known", "versions script facts reason")
KNOWN = [
    Known(("2.4.1", "2.9.1"), "samples/lstm_language_model.py", ("peak_retained_bytes",),
          "PyTorch's LSTM saves more for backward on these lines (gradviz reads the bytes each node really holds, "
          "as on 2.13; the diagnostics, graphs and nodes are the same)"),
    Known(("2.4.1", "2.9.1"), "tests/torch_scripts/char_lstm_tbptt.py", ("peak_retained_bytes",),
          "the same LSTM difference as lstm_language_model.py"),
    Known(("2.4.1", "2.9.1"), "samples/hidden_state_not_detached.py", ("peak_retained_bytes",),
          "the same LSTM difference as lstm_language_model.py (an nn.LSTM carried across batches)"),
    Known(("2.4.1", "2.9.1"), "samples/hidden_state_not_detached_fixed.py", ("peak_retained_bytes",),
          "the same LSTM difference as lstm_language_model.py"),
    Known(("2.4.1",), "samples/transformer_encoder_block.py", ("nodes", "peak_retained_bytes"),
          "torch 2.4's attention keeps a whole-range slice as a SliceBackward0 node (12 more nodes here; the "
          "transformer test counts the same per layer); the 7% higher peak comes with it (not traced to one op)"),
    Known(("2.4.1", "2.14.1", "2.15.0"), "tests/torch_scripts/compiled_model.py", ("unseen",),
          "inductor starts its compile workers as plain subprocesses or not, by version and by the state of its "
          "cache; gradviz lists each interpreter it saw started"),
]


def main(argv=None):
    args = parse(argv)
    runs = [parse_version(v) for v in args.versions]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def one(run):
        version, venv = run
        if args.from_results:  # a run before: its facts, judged again (with this run's reruns)
            return version, json.loads((out / f"{version}.json").read_text())
        python = Path(venv) / "bin" / "python" if venv else make_venv(version, Path(args.venvs), args)
        if python is None:
            return version, {"error": "venv could not be made (see above)"}
        print(f"== torch {version}: {python}", file=sys.stderr, flush=True)
        result = run_version(python, out / version)
        (out / f"{version}.json").write_text(json.dumps(result, indent=1))
        print(f"== torch {version}: done", file=sys.stderr, flush=True)
        return version, result

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = dict(pool.map(one, runs))
    reference = results.get(args.reference)
    if reference is None and (out / f"{args.reference}.json").exists():
        reference = json.loads((out / f"{args.reference}.json").read_text())
    rerun_differences(results, reference, runs, args)
    for version, result in results.items():
        (out / f"{version}.json").write_text(json.dumps(result, indent=1))
    rows, notes, bad = judge(results, reference, args.reference)
    print(f"torch matrix, {datetime.date.today().isoformat()}, gradviz at {commit()}:\n")
    print(markdown(rows))
    print("\n".join([""] + notes))
    return 1 if bad else 0


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("versions", nargs="*", default=DEFAULT, help="torch versions (VERSION or VERSION=existing venv)")
    p.add_argument("--venvs", default=str(CACHE / "venvs"), help="where the venvs are made (outside any checkout)")
    p.add_argument("--pip-cache", default=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
                   help="pip's cache, shared by every venv")
    p.add_argument("--out", default=str(CACHE / "results"), help="per-version facts (JSON)")
    p.add_argument("--reference", default="2.13.0", help="the version the scripts' facts are compared with")
    p.add_argument("--jobs", type=int, default=1, help="versions run side by side (each runs its tests serially)")
    p.add_argument("--from-results", action="store_true",
                   help="judge the facts an earlier run left in --out instead of running tests and scripts again")
    p.add_argument("--python", default=sys.executable, help="the interpreter the venvs are made from")
    return p.parse_args(argv)


def parse_version(text):
    version, _, path = text.partition("=")
    return version, (path or None)


def make_venv(version, root, args):
    venv = root / f"torch-{version}"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return python
    subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
    pin = venv / "pin.txt"
    pin.write_text(f"torch=={version}\n")
    # the pin file as pip's only constraint: it replaces a config's cap (torch<=X) instead of adding to it
    env = dict(os.environ, PIP_CONSTRAINT=str(pin))
    pip = [str(python), "-m", "pip", "install", "--cache-dir", args.pip_cache]
    # the project's own dependencies and test tools, and exactly this torch (the oracle extra pins another)
    done = subprocess.run(pip + [f"torch=={version}", "-e", f"{REPO}[test]"], env=env)
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


def run_version(python, folder):
    folder.mkdir(parents=True, exist_ok=True)
    env = env_for()
    version = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, env=env)
    if version.returncode != 0:
        return {"error": f"import torch failed: {version.stderr.strip().splitlines()[-1:]}"}
    junit = folder / "tests.xml"
    junit.unlink(missing_ok=True)  # a report left by an earlier run must not be counted for this one
    with open(folder / "pytest.log", "w") as log:
        subprocess.run([str(python), "-m", "pytest", "-q", "-rs", "-p", "no:xdist", "-p", "no:cacheprovider",
                        f"--junitxml={junit}", *torch_test_files()], cwd=REPO, env=env, stdout=log,
                       stderr=subprocess.STDOUT)
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


def own_temporary_folder(env, folder):
    """``env`` with TMPDIR at ``folder``: torchrun's and mp.spawn's leftovers (torchelastic's log folders, a DDP
    sample's pytorch-errorfile pickles) go there and are removed with it instead of staying in /tmp. Inductor's
    compile cache stays where it was (its default lives under TMPDIR): a cold cache changes which helper
    processes a compiled script starts, one of the facts compared."""
    inductor = os.path.join(tempfile.gettempdir(), "torchinductor_" + getpass.getuser())
    return dict(env, TMPDIR=str(folder), TORCHINDUCTOR_CACHE_DIR=env.get("TORCHINDUCTOR_CACHE_DIR", inductor))


def sample_facts(python, script, env):
    """What the matrix compares across versions: diagnostics at their lines, graph counts, memory figures."""
    with tempfile.TemporaryDirectory(prefix="gradviz-matrix-") as tmp:
        run = subprocess.run([str(python), "-m", "gradviz", "run", "--engine", "torch", "--json-only", str(script)],
                             capture_output=True, text=True, env=own_temporary_folder(env, tmp), cwd=REPO)
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


def rerun_differences(results, reference, runs, args):
    """Run once more each script whose facts differ from the reference, and then the reference's own run of it
    when they still differ: on a loaded machine the DDP samples' ranks can time out and lose a diagnostic (on
    any version, the reference's included). A second run that matches is kept, and the first one's facts are
    noted (``flaky``), never dropped silently."""
    if reference is None:
        return
    env = env_for()
    venvs = dict(runs)

    def python_of(version):
        venv = venvs.get(version)
        return Path(venv) / "bin" / "python" if venv else Path(args.venvs) / f"torch-{version}" / "bin" / "python"

    for version, _ in runs:
        r = results.get(version)
        if not r or r.get("error") or r is reference:
            continue
        for name, facts in list(r["samples"].items()):
            theirs = reference.get("samples", {}).get(name)
            if theirs is None or facts == theirs:
                continue
            if all(explained(version, name, k) for k in set(facts) | set(theirs) if facts.get(k) != theirs.get(k)):
                continue  # a known PyTorch difference: nothing to run again
            again = sample_facts(python_of(version), REPO / name, env)
            if again == theirs:
                r["samples"][name] = again
                r.setdefault("flaky", {})[name] = facts
                continue
            if name in reference.get("flaky", {}):
                continue  # the reference was run again already
            ours = sample_facts(python_of(args.reference), REPO / name, env)
            if ours != theirs:
                reference["samples"][name] = ours
                reference.setdefault("flaky", {})[name] = theirs


def explained(version, script, fact):
    """The reason a fact of ``script`` differs from the reference on torch ``version``, or None."""
    short = version.split("+")[0]
    for known in KNOWN:
        if short in known.versions and script == known.script and fact in known.facts:
            return known.reason
    return None


def judge(results, reference, reference_version):
    """Per version a table row, the notes below the table, and whether anything is wrong."""
    rows = [("torch", "passed", "failed", "errors", "skipped", f"scripts as on {reference_version}",
             "known differences", "unexplained")]
    notes, bad = [], False
    if reference is None or reference.get("error"):
        notes.append(f"no reference run of torch {reference_version}: the scripts' facts were not compared")
        bad = True
    for version, r in results.items():
        if r.get("error"):
            rows.append((version, "-", "-", "-", "-", "-", "-", r["error"]))
            bad = True
            continue
        t = r["tests"]
        bad = bad or bool(t["failed"] or t["errors"])
        notes += [f"{version}: failed {name}" for name in t["failures"]]
        same = allowed = unexplained = 0
        for name, facts in r["samples"].items():
            if facts.get("error"):
                unexplained += 1
                notes.append(f"{version}: {name} could not be run: {facts['error']}")
                continue
            theirs = None if reference is None else reference.get("samples", {}).get(name)
            if theirs is None:
                continue
            differ = [k for k in sorted(set(facts) | set(theirs)) if facts.get(k) != theirs.get(k)]
            if not differ:
                same += 1
                continue
            reasons = {k: explained(version, name, k) for k in differ}
            if all(reasons.values()):
                allowed += 1
            else:
                unexplained += 1
            for k in differ:
                what = f"{version}: {name}: {k} {facts.get(k)!r} (on {reference_version}: {theirs.get(k)!r})"
                notes.append(what + (f": known, {reasons[k]}" if reasons[k] else ": UNEXPLAINED"))
        for name, first in r.get("flaky", {}).items():
            notes.append(f"{version}: {name} was run twice (a difference from {reference_version}); the second run's "
                         f"facts are the ones compared, the first gave {diff(first, r['samples'][name])}")
        bad = bad or bool(unexplained)
        rows.append((f"{version} ({r['torch']})", str(t["passed"]), str(t["failed"]), str(t["errors"]),
                     str(t["skipped"]), f"{same}/{len(r['samples'])}", str(allowed), str(unexplained)))
    return rows, notes, bad


def diff(mine, theirs):
    return ", ".join(f"{k} {mine.get(k)!r} (reference {theirs.get(k)!r})" for k in sorted(set(mine) | set(theirs))
                     if mine.get(k) != theirs.get(k))


def markdown(rows):
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def commit():
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (found.stdout.strip() or "?") + (" with uncommitted changes" if dirty else "")


if __name__ == "__main__":
    sys.exit(main())
