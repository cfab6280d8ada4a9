"""Fault injection for ``gradviz run``: whatever fails around the script, a complete report lands.

Each test does to gradviz what an unlucky or hostile run does — a ``dot`` that fails, hangs or lacks PNG, a
full disk, Ctrl-C while the report is written, a link planted in the output folder, a reader that closes the
pipe, every way a script can end — and checks three things: the folder holds the previous complete report or a
complete new one (valid JSON that ``load_trace`` reads, an HTML page that ends), never a truncated one or a
leftover temporary file; gradviz says what went wrong in one line, never with a traceback of its own; and the
exit status is the script's (130 for Ctrl-C).

Most run gradviz as a real subprocess (signals, pipes, file descriptors and PATH are the point).
"""

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

import gradviz
from gradviz.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")

# two graph structures, so two pictures
TWO_STRUCTURES = """\
import gradviz

x = gradviz.ones(3, requires_grad=True)
(x * 2).sum().backward()
(x.exp() + x).sum().backward()
"""

ONE_STRUCTURE = """\
import gradviz

x = gradviz.ones(3, requires_grad=True)
(x * 2).sum().backward()
"""

# many nodes: its report.json takes a while to write and is much larger than a small one
BIG = """\
import gradviz

x = gradviz.ones(4, requires_grad=True)
y = x
for _ in range({n}):
    y = y * 1.0001 + 0.5
y.sum().backward()
print("script done", flush=True)
"""


@pytest.fixture(autouse=True)
def interruptible_children():
    """gradviz's processes here start with Ctrl-C's default action even when the test run was started in the
    background by a shell (which ignores SIGINT there, and an ignored signal stays ignored across exec): the
    Ctrl-C tests send SIGINT and expect gradviz's own handling of it."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a handled signal is reset to default on exec)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def write_script(folder, text, name="script.py"):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(text))
    return path


def gradviz_command(*args):
    return [sys.executable, "-m", "gradviz", *args]


def environment(path_first=None):
    env = dict(os.environ, PYTHONPATH=REPO, COLUMNS="200")
    if path_first:
        env["PATH"] = path_first + os.pathsep + env.get("PATH", "")
    return env


def run_gradviz(*args, cwd, path_first=None, timeout=120):
    return subprocess.run(gradviz_command(*args), cwd=cwd, env=environment(path_first), capture_output=True,
                          text=True, timeout=timeout, errors="backslashreplace")


def assert_complete_report(folder):
    """report.json reads back as a trace, report.html is a whole page, and no temporary file was left."""
    doc = gradviz.load_trace(os.path.join(folder, "report.json"))
    with open(os.path.join(folder, "report.html"), encoding="utf-8") as f:
        page = f.read()
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert [name for name in os.listdir(folder) if name.endswith(".gradviz-tmp")] == []
    return doc, page


def snapshot(folder):
    """{name: bytes} of the regular files in ``folder``."""
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                out[name] = f.read()
    return out


def gradviz_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("gradviz:")]


def assert_no_gradviz_traceback(stderr):
    """No traceback from gradviz itself (the script's own, trimmed to its frames, is allowed)."""
    assert os.path.join("gradviz", "cli") not in stderr
    assert os.path.join("gradviz", "rendering") not in stderr
    assert os.path.join("site-packages", "click") not in stderr


def fake_dot(folder, body):
    """A ``dot`` program on PATH that runs the shell ``body`` (``$1`` is ``-T<format>``)."""
    bin_dir = os.path.join(folder, "fakebin")
    os.makedirs(bin_dir, exist_ok=True)
    path = os.path.join(bin_dir, "dot")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + textwrap.dedent(body))
    os.chmod(path, 0o755)
    return bin_dir


# ----- a picture that fails is skipped; the report and the other pictures still land ---------------------------
def test_dot_failing_skips_each_picture_with_its_reason_and_the_report_lands(tmp_path):
    bin_dir = fake_dot(tmp_path, 'echo "Error: something broke inside dot" >&2\nexit 1\n')
    write_script(tmp_path, TWO_STRUCTURES)
    done = run_gradviz("run", "--out", "out", "script.py", cwd=tmp_path, path_first=bin_dir)
    assert done.returncode == 0, done.stderr
    doc, page = assert_complete_report(tmp_path / "out")
    skipped = doc["manifest"]["skipped_pictures"]
    assert [s["file"] for s in skipped] == ["structure-0-iter0.svg", "structure-1-iter1.svg"]
    assert {s["reason"] for s in skipped} == {"dot failed: Error: something broke inside dot"}
    assert doc["manifest"]["files"] == ["report.json", "report.html"]
    assert sorted(os.listdir(tmp_path / "out")) == ["report.html", "report.json"]
    assert gradviz_lines(done.stderr) == [
        "gradviz: skipped picture structure-0-iter0.svg (structure 0, iteration 0): dot failed: Error: something "
        "broke inside dot",
        "gradviz: skipped picture structure-1-iter1.svg (structure 1, iteration 1): dot failed: Error: something "
        "broke inside dot"]
    assert done.stderr.count("\n") == 2
    assert "2 pictures skipped" in page and "something broke inside dot" in page
    assert "pictures-pending" not in page


@NEEDS_DOT
def test_a_graphviz_without_png_skips_the_png_pictures_only(tmp_path):
    real_dot = shutil.which("dot")
    bin_dir = fake_dot(tmp_path, f"""\
        if [ "$1" = "-Tpng" ]; then
          echo 'Format: "png" not recognized. Use one of: dot svg' >&2
          exit 1
        fi
        exec {real_dot} "$@"
        """)
    write_script(tmp_path, ONE_STRUCTURE)
    done = run_gradviz("run", "--format", "png", "--out", "out", "script.py", cwd=tmp_path, path_first=bin_dir)
    assert done.returncode == 0
    doc, _ = assert_complete_report(tmp_path / "out")
    assert doc["manifest"]["skipped_pictures"] == [
        {"file": "structure-0-iter0.png", "picture": "structure 0, iteration 0",
         "reason": 'dot failed: Format: "png" not recognized. Use one of: dot svg'}]
    assert gradviz_lines(done.stderr) == [
        'gradviz: skipped picture structure-0-iter0.png (structure 0, iteration 0): dot failed: Format: "png" not '
        'recognized. Use one of: dot svg']


def test_dot_crashing_is_a_skipped_picture(tmp_path):
    bin_dir = fake_dot(tmp_path, "kill -SEGV $$\n")
    write_script(tmp_path, ONE_STRUCTURE)
    done = run_gradviz("run", "--out", "out", "script.py", cwd=tmp_path, path_first=bin_dir)
    assert done.returncode == 0
    doc, _ = assert_complete_report(tmp_path / "out")
    (skipped,) = doc["manifest"]["skipped_pictures"]
    assert skipped["reason"].startswith("dot failed: exit status -11")
    assert len(gradviz_lines(done.stderr)) == 1 and done.stderr.count("\n") == 1


def test_dot_hanging_past_the_time_budget_is_a_skipped_picture(tmp_path):
    bin_dir = fake_dot(tmp_path, "exec sleep 60\n")
    write_script(tmp_path, ONE_STRUCTURE)
    started = time.monotonic()
    done = run_gradviz("run", "--out", "out", "script.py", cwd=tmp_path, path_first=bin_dir)
    assert time.monotonic() - started < 30  # the 4 s budget, not dot's 60 s
    assert done.returncode == 0
    doc, _ = assert_complete_report(tmp_path / "out")
    (skipped,) = doc["manifest"]["skipped_pictures"]
    assert "did not lay out within the 4.0 s budget" in skipped["reason"]
    assert len(gradviz_lines(done.stderr)) == 1


@NEEDS_DOT
def test_a_label_too_long_for_dot_is_a_skipped_picture(tmp_path):
    write_script(tmp_path, """\
        import gradviz

        x = gradviz.ones(3, requires_grad=True)
        x.name = "L" * 20000
        (x * 2).sum().backward()
        """)
    done = run_gradviz("run", "--out", "out", "script.py", cwd=tmp_path)
    assert done.returncode == 0
    doc, _ = assert_complete_report(tmp_path / "out")
    (skipped,) = doc["manifest"]["skipped_pictures"]
    assert skipped["file"] == "structure-0-iter0.svg" and skipped["reason"].startswith("dot failed:")
    assert len(gradviz_lines(done.stderr)) == 1


# ----- a full disk ------------------------------------------------------------------------------------------------
def _mount_small_tmpfs(folder):
    # room for the small run's report (report.html inlines its viewer and layout scripts, ~100 kB, and is written
    # twice: before the pictures, then with them, the second beside the first), not for the big one's (its
    # report.json alone is ~480 kB)
    os.makedirs(folder, exist_ok=True)
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320k", "tmpfs", str(folder)], capture_output=True)
    return done.returncode == 0


def test_a_full_disk_keeps_the_previous_report(tmp_path):
    out = tmp_path / "small"
    if not _mount_small_tmpfs(out):
        pytest.skip("cannot mount a small tmpfs here (needs root); the injected ENOSPC test covers this")
    try:
        write_script(tmp_path, ONE_STRUCTURE, "small_run.py")
        write_script(tmp_path, BIG.format(n=300), "big_run.py")
        first = run_gradviz("run", "--format", "dot", "--out", str(out), "small_run.py", cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        before = snapshot(out)
        done = run_gradviz("run", "--format", "dot", "--out", str(out), "big_run.py", cwd=tmp_path)
        assert done.returncode == 1
        assert_no_gradviz_traceback(done.stderr)
        assert gradviz_lines(done.stderr) == [
            "gradviz: error: cannot write `small/report.json`: No space left on device; the previous report there "
            "is unchanged"]
        assert snapshot(out) == before
        doc, _ = assert_complete_report(out)
        assert doc["script"] == "small_run.py"
    finally:
        subprocess.run(["umount", str(out)], check=False)


def test_an_injected_enospc_keeps_the_previous_report(tmp_path, monkeypatch):
    import gradviz.atomic

    write_script(tmp_path, ONE_STRUCTURE)
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(main, ["run", "--format", "dot", "--out", "out", "script.py"]).exit_code == 0
    before = snapshot(tmp_path / "out")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(gradviz.atomic.os, "fsync", full_disk)
    result = runner.invoke(main, ["run", "--format", "dot", "--out", "out", "script.py"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == ("gradviz: error: cannot write `out/report.json`: No space left on "
                                              "device; the previous report there is unchanged")
    assert snapshot(tmp_path / "out") == before


# ----- Ctrl-C -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("delay", [0, 0.05])  # at once: the temporary file was just created; later: mid-write
def test_ctrl_c_while_the_report_is_written_keeps_the_previous_report_and_exits_130(tmp_path, delay):
    out = tmp_path / "out"
    write_script(tmp_path, ONE_STRUCTURE, "small_run.py")
    write_script(tmp_path, BIG.format(n=6000), "big_run.py")
    assert run_gradviz("run", "--no-render", "--out", "out", "small_run.py", cwd=tmp_path).returncode == 0
    before = snapshot(out)
    # Each staged file lingers half a second before its flush, so the signal lands mid-write however fast the
    # machine writes (without it, a quick write could finish before the signal and the test would be a race).
    slow = tmp_path / "slow_writes"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(textwrap.dedent("""\
        import time

        import gradviz.atomic

        _sync = gradviz.atomic.Staged.sync


        def _slow_sync(self):
            time.sleep(0.5)
            return _sync(self)


        gradviz.atomic.Staged.sync = _slow_sync
        """))
    env = dict(environment(), PYTHONPATH=os.pathsep.join([str(slow), REPO]))
    process = subprocess.Popen(gradviz_command("run", "--no-render", "--out", "out", "big_run.py"), cwd=tmp_path,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if any(name.endswith(".gradviz-tmp") for name in os.listdir(out)):
            time.sleep(delay)
            process.send_signal(signal.SIGINT)  # the report is being written right now
            break
        time.sleep(0.001)
    else:
        process.kill()
        pytest.fail("never saw gradviz writing the report")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert_no_gradviz_traceback(stderr)
    assert stderr.splitlines()[-1].startswith("gradviz: error: interrupted (Ctrl-C)")
    assert len(gradviz_lines(stderr)) == 1
    assert stdout == "script done\n"  # nothing printed: the files come first
    after = snapshot(out)
    if after != before:  # the signal came between the two renames: then it is this run's complete report
        doc, _ = assert_complete_report(out)
        assert doc["script"] == "big_run.py"
    assert_complete_report(out)


def test_ctrl_c_in_the_script_is_recorded_and_exits_130(tmp_path):
    write_script(tmp_path, """\
        import os
        import signal

        import gradviz

        x = gradviz.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        os.kill(os.getpid(), signal.SIGINT)
        """)
    done = run_gradviz("run", "--out", "out", "script.py", cwd=tmp_path)
    assert done.returncode == 130
    doc, page = assert_complete_report(tmp_path / "out")
    assert doc["status"]["ending"] == "interrupted" and doc["status"]["exit_code"] == 130
    assert doc["status"]["exception"]["type"] == "KeyboardInterrupt"
    assert done.stderr.splitlines()[-1] == "KeyboardInterrupt"
    assert_no_gradviz_traceback(done.stderr)
    assert "interrupted (KeyboardInterrupt, exit status 130)" in page


# ----- a link planted in the output folder ---------------------------------------------------------------------
def test_a_link_planted_at_report_html_is_refused_and_its_target_untouched(tmp_path):
    write_script(tmp_path, ONE_STRUCTURE)
    out = tmp_path / "out"
    assert run_gradviz("run", "--format", "dot", "--out", "out", "script.py", cwd=tmp_path).returncode == 0
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    os.unlink(out / "report.html")
    os.symlink(target, out / "report.html")
    before = snapshot(out)
    done = run_gradviz("run", "--format", "dot", "--out", "out", "script.py", cwd=tmp_path)
    assert done.returncode == 1
    assert target.read_text() == "keep me\n"
    assert os.path.islink(out / "report.html")
    assert snapshot(out) == before  # report.json is the previous one too: the two are written together
    assert gradviz_lines(done.stderr) == [
        "gradviz: error: cannot write `out/report.html`: is a symbolic link; gradviz does not write through "
        "links (remove it and run again); the previous report there is unchanged"]
    assert_no_gradviz_traceback(done.stderr)


def test_a_link_planted_at_a_picture_name_skips_that_picture(tmp_path):
    write_script(tmp_path, ONE_STRUCTURE)
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    os.symlink(target, out / "structure-0-iter0.dot")
    done = run_gradviz("run", "--format", "dot", "--out", "out", "script.py", cwd=tmp_path)
    assert done.returncode == 0
    assert target.read_text() == "keep me\n" and os.path.islink(out / "structure-0-iter0.dot")
    doc, _ = assert_complete_report(out)
    assert doc["manifest"]["skipped_pictures"][0]["reason"].startswith("is a symbolic link")
    assert len(gradviz_lines(done.stderr)) == 1


# ----- a reader that goes away -----------------------------------------------------------------------------------
@pytest.mark.parametrize("script_text, status", [(ONE_STRUCTURE, 0), (ONE_STRUCTURE + "raise SystemExit(3)\n", 3)])
def test_a_pipe_closed_early_still_writes_the_files_and_keeps_the_status(tmp_path, script_text, status):
    write_script(tmp_path, script_text)
    process = subprocess.Popen(gradviz_command("run", "--format", "dot", "--out", "out", "script.py"),
                               cwd=tmp_path, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = process.stdout.readline()  # `| head -1`
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == status
    assert first == b"gradviz: no mistakes seen in 1 graph\n"  # the verdict first
    assert stderr == ""
    doc, _ = assert_complete_report(tmp_path / "out")
    assert doc["status"]["exit_code"] == status


# ----- every way a script ends -------------------------------------------------------------------------------------
ENDINGS = {
    "finishes": (ONE_STRUCTURE, 0, {"completed": True, "ending": "finished", "exit_code": 0, "exception": None}),
    "sys.exit(3)": (ONE_STRUCTURE + "import sys\nsys.exit(3)\n", 3,
                    {"completed": False, "ending": "exit", "exit_code": 3, "exception": None}),
    "sys.exit(text)": (ONE_STRUCTURE + "import sys\nsys.exit('bad config')\n", 1,
                       {"completed": False, "ending": "exit", "exit_code": 1, "exception": None,
                        "exit_message": "bad config"}),
    "raises": (ONE_STRUCTURE + "raise ValueError('broken')\n", 1,
               {"completed": False, "ending": "exception", "exit_code": 1,
                "exception": ("ValueError", "broken")}),
    "KeyboardInterrupt": (ONE_STRUCTURE + "raise KeyboardInterrupt\n", 130,
                          {"completed": False, "ending": "interrupted", "exit_code": 130,
                           "exception": ("KeyboardInterrupt", "")}),
    "GeneratorExit": (ONE_STRUCTURE + "raise GeneratorExit('closed')\n", 1,
                      {"completed": False, "ending": "exception", "exit_code": 1,
                       "exception": ("GeneratorExit", "closed")}),
    "BaseException subclass": (ONE_STRUCTURE + "class Halt(BaseException):\n    pass\nraise Halt('stop here')\n", 1,
                               {"completed": False, "ending": "exception", "exit_code": 1,
                                "exception": ("Halt", "stop here")}),
    "__str__ raises": (ONE_STRUCTURE + "class Odd(Exception):\n    def __str__(self):\n        raise TypeError\n"
                       "raise Odd()\n", 1,
                       {"completed": False, "ending": "exception", "exit_code": 1,
                        "exception": ("Odd", "<exception str() failed>")}),
}


@pytest.mark.parametrize("name", list(ENDINGS))
def test_every_script_ending_is_recorded_with_the_scripts_exit_status(tmp_path, name):
    text, status, expected = ENDINGS[name]
    write_script(tmp_path, text)
    done = run_gradviz("run", "--format", "dot", "--out", "out", "script.py", cwd=tmp_path)
    assert done.returncode == status, done.stderr
    doc, page = assert_complete_report(tmp_path / "out")
    recorded = dict(doc["status"])
    exc = recorded.pop("exception")
    expected = dict(expected)
    expected_exc = expected.pop("exception")
    assert recorded == expected
    if expected_exc is None:
        assert exc is None
    else:
        assert (exc["type"], exc["message"]) == expected_exc
        assert exc["location"]["file"] == "script.py"
        assert done.stderr.splitlines()[-1].startswith(expected_exc[0])  # the script's traceback, as Python ends it
    assert_no_gradviz_traceback(done.stderr)
    assert gradviz_lines(done.stderr) == []
    assert doc["manifest"]["files"] == ["report.json", "report.html", "structure-0-iter0.dot"]


def test_a_script_deleting_its_working_folder_gets_its_report_where_out_resolved_at_start(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    write_script(work, ONE_STRUCTURE + textwrap.dedent("""\
        import os, shutil
        here = os.getcwd()
        os.chdir(os.path.dirname(here))
        shutil.rmtree(here)
        """))
    script = str(work / "script.py")
    with open(script) as f:
        text = f.read()
    elsewhere = tmp_path / "script_copy.py"  # the script itself lives outside the folder it deletes
    elsewhere.write_text(text)
    done = run_gradviz("run", "--format", "dot", str(elsewhere), cwd=work)
    assert done.returncode == 0, done.stderr
    assert_no_gradviz_traceback(done.stderr)
    assert gradviz_lines(done.stderr) == [
        f"gradviz: the script removed the folder it started in, `{work}`; gradviz went on from `{tmp_path}`"]
    doc, _ = assert_complete_report(work / "gradviz-out" / "script_copy")
    assert doc["status"]["completed"] is True


def test_non_utf8_file_and_variable_names_are_escaped_not_a_crash(tmp_path):
    name = os.fsdecode(b"caf\xe9.py")  # Latin-1 bytes: a lone surrogate in Python's str
    write_script(tmp_path, """\
        import gradviz

        x = gradviz.ones(3, requires_grad=True)
        x.name = "w\\udce9"
        y = (x * 2).sum()
        y.backward()
        raise ValueError("bad \\udce9 value")
        """, name)
    done = run_gradviz("run", "--format", "dot", "--out", "out", name, cwd=tmp_path)
    assert done.returncode == 1
    assert_no_gradviz_traceback(done.stderr)
    assert "ValueError: bad \\udce9 value" in done.stderr
    assert "caf\\udce9.py" in done.stdout
    doc, page = assert_complete_report(tmp_path / "out")
    assert doc["script"] == name and doc["status"]["exception"]["message"] == "bad \udce9 value"
    assert "caf\\udce9.py" in page


# ----- --json-only: stdout is the document alone -------------------------------------------------------------------
def test_json_only_stdout_is_the_document_whatever_the_script_and_its_children_print(tmp_path):
    write_script(tmp_path, ONE_STRUCTURE + textwrap.dedent("""\
        import os, subprocess, sys
        print("from print")
        sys.__stdout__.write("from sys.__stdout__, unflushed\\n")
        os.system("echo from os.system")
        subprocess.run(["echo", "from subprocess"])
        os.write(1, b"from fd 1\\n")
        """))
    done = run_gradviz("run", "--json-only", "script.py", cwd=tmp_path)
    assert done.returncode == 0
    doc = json.loads(done.stdout)
    assert doc["format"] == "gradviz-trace" and doc["status"]["completed"] is True
    for text in ("from print", "from sys.__stdout__, unflushed", "from os.system", "from subprocess", "from fd 1"):
        assert text in done.stderr
    assert not (tmp_path / "gradviz-out").exists()


# ----- each run owns its output -----------------------------------------------------------------------------------
def test_a_rerun_removes_the_earlier_runs_pictures_but_never_a_users_file(tmp_path):
    out = tmp_path / "out"
    write_script(tmp_path, TWO_STRUCTURES)
    assert run_gradviz("run", "--format", "dot", "--out", "out", "script.py", cwd=tmp_path).returncode == 0
    assert sorted(os.listdir(out)) == ["report.html", "report.json", "structure-0-iter0.dot",
                                       "structure-1-iter1.dot"]
    (out / "notes.txt").write_text("mine")
    (out / "structure-7-iter0.svg.bak").write_text("mine too")
    (out / "structure-8-iter0.dot").mkdir()  # a folder with gradviz's kind of name: not a gradviz file
    os.symlink(tmp_path / "notes-elsewhere", out / "structure-9-iter0.svg")
    (out / ".report.json.abc123.gradviz-tmp").write_text("left by a killed run")
    write_script(tmp_path, ONE_STRUCTURE)
    assert run_gradviz("run", "--format", "dot", "--out", "out", "script.py", cwd=tmp_path).returncode == 0
    assert sorted(os.listdir(out)) == ["notes.txt", "report.html", "report.json", "structure-0-iter0.dot",
                                       "structure-7-iter0.svg.bak", "structure-8-iter0.dot",
                                       "structure-9-iter0.svg"]
    doc, _ = assert_complete_report(out)
    assert doc["manifest"] == {"files": ["report.json", "report.html", "structure-0-iter0.dot"],
                               "skipped_pictures": []}


# ----- the library's own writer ------------------------------------------------------------------------------------
def _small_document():
    x = gradviz.ones(3, requires_grad=True)
    with gradviz.trace() as tr:
        (x * 2).sum().backward()
    return tr.to_dict()


def test_to_json_failing_halfway_keeps_the_previous_file(tmp_path):
    path = tmp_path / "trace.json"
    doc = _small_document()
    doc.to_json(path)
    before = path.read_bytes()
    broken = type(doc)(doc)
    broken["internal_errors"] = [{"where": "x", "type": "y", "message": float("nan")}]  # found late by json
    with pytest.raises(ValueError):
        broken.to_json(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["trace.json"]
    assert gradviz.load_trace(path)["format"] == "gradviz-trace"


def test_to_json_on_a_full_disk_keeps_the_previous_file(tmp_path, monkeypatch):
    import gradviz.atomic

    path = tmp_path / "trace.json"
    doc = _small_document()
    doc.to_json(path)
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(gradviz.atomic.os, "fsync", full_disk)
    with pytest.raises(OSError) as caught:
        doc.to_json(path)
    assert caught.value.errno == errno.ENOSPC
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["trace.json"]


def test_to_json_refuses_a_link_and_keeps_the_file_mode(tmp_path):
    doc = _small_document()
    target = tmp_path / "target.txt"
    target.write_text("keep")
    os.symlink(target, tmp_path / "link.json")
    with pytest.raises(OSError, match="is a symbolic link"):
        doc.to_json(tmp_path / "link.json")
    assert target.read_text() == "keep"
    path = tmp_path / "shared.json"
    path.write_text("{}")
    os.chmod(path, 0o640)
    doc.to_json(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


# ----- bad option values: one line ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, line", [
    (["run", "--max-nodes", "x", "s.py"],
     "gradviz: error: Invalid value for '--max-nodes': 'x' is not a valid integer range (see `gradviz run --help`)"),
    (["run", "--max-nodes", "0", "s.py"],
     "gradviz: error: Invalid value for '--max-nodes': 0 is not in the range x>=1 (see `gradviz run --help`)"),
    (["run", "--format", "gif", "s.py"],
     "gradviz: error: Invalid value for '--format': 'gif' is not one of 'svg', 'png', 'pdf', 'dot' "
     "(see `gradviz run --help`)"),
    (["graph", "s.py", "--iteration", "-1"],
     "gradviz: error: Invalid value for '--iteration': -1 is not in the range x>=0 (see `gradviz graph --help`)"),
    (["run"], "gradviz: error: Missing argument 'SCRIPT' (see `gradviz run --help`)"),
    (["frobnicate"], "gradviz: error: No such command 'frobnicate' (see `gradviz --help`)"),
])
def test_bad_option_values_are_one_line_with_status_2(args, line):
    result = CliRunner().invoke(main, args, prog_name="gradviz")
    assert result.exit_code == 2
    assert result.stderr == line + "\n"
    assert result.stdout == ""


def test_an_option_after_script_is_named_as_an_option(tmp_path):
    result = CliRunner().invoke(main, ["run", "--bogus", "s.py"], prog_name="gradviz")
    assert result.exit_code == 1
    assert result.stderr == ("gradviz: error: no such option `--bogus` (gradviz's own options go before SCRIPT; "
                             "see --help)\n")


def test_graph_with_a_failing_dot_is_one_line(tmp_path):
    bin_dir = fake_dot(tmp_path, 'echo "Error: something broke inside dot" >&2\nexit 1\n')
    write_script(tmp_path, ONE_STRUCTURE)
    done = run_gradviz("graph", "script.py", "-o", "g.svg", cwd=tmp_path, path_first=bin_dir)
    assert done.returncode == 1
    assert done.stderr == "gradviz: error: cannot draw `g.svg`: dot failed: Error: something broke inside dot\n"
    assert not (tmp_path / "g.svg").exists()


def test_a_failure_building_report_html_still_writes_report_json(tmp_path, monkeypatch):
    import gradviz.rendering.html

    def broken(*args, **kwargs):
        raise KeyError("oops")

    monkeypatch.setattr(gradviz.rendering.html, "html_parts", broken)  # what artifacts writes the page from
    write_script(tmp_path, ONE_STRUCTURE)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "--format", "dot", "--out", "out", "script.py"])
    assert result.exit_code == 0
    doc, page = assert_complete_report(tmp_path / "out")
    assert doc["internal_errors"] == [{"where": "report.html", "type": "KeyError", "message": "'oops'"}]
    assert "gradviz could not build this page (KeyError: &#x27;oops&#x27;)" in page


def test_graph_refuses_a_planted_link_and_keeps_the_previous_picture_on_failure(tmp_path):
    write_script(tmp_path, ONE_STRUCTURE)
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    os.symlink(target, tmp_path / "link.dot")
    done = run_gradviz("graph", "script.py", "-o", "link.dot", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == ("gradviz: error: cannot write `link.dot`: is a symbolic link; gradviz does not write "
                           "through links (remove it and run again)\n")
    assert target.read_text() == "keep me\n"
    assert run_gradviz("graph", "script.py", "-o", "g.svg", cwd=tmp_path).returncode == 0
    before = (tmp_path / "g.svg").read_bytes()
    bin_dir = fake_dot(tmp_path, 'echo "Error: broken" >&2\nexit 1\n')
    assert run_gradviz("graph", "script.py", "-o", "g.svg", cwd=tmp_path, path_first=bin_dir).returncode == 1
    assert (tmp_path / "g.svg").read_bytes() == before
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".gradviz-tmp")]


def test_a_disk_filling_up_while_pictures_are_drawn_keeps_this_runs_first_report(tmp_path, monkeypatch):
    import gradviz.atomic

    write_script(tmp_path, TWO_STRUCTURES)
    monkeypatch.chdir(tmp_path)
    real_fsync, calls = os.fsync, []

    def fills_up_after_the_reports(fd):
        calls.append(fd)
        if len(calls) > 2:  # report.json and report.html went through; the disk is full from then on
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(gradviz.atomic.os, "fsync", fills_up_after_the_reports)
    result = CliRunner().invoke(main, ["run", "--format", "dot", "--out", "out", "script.py"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "gradviz: skipped picture structure-0-iter0.dot (structure 0, iteration 0): No space left on device",
        "gradviz: skipped picture structure-1-iter1.dot (structure 1, iteration 1): No space left on device",
        "gradviz: error: cannot write `out/report.json`: No space left on device; this run's report, written "
        "before the pictures, stays"]
    doc, page = assert_complete_report(tmp_path / "out")
    assert doc["script"] == "script.py" and 'id="pictures-pending"' in page
    assert sorted(os.listdir(tmp_path / "out")) == ["report.html", "report.json"]


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"),
                    reason="needs /proc/PID/task/PID/children to see when dot is running")
def test_ctrl_c_in_gradviz_graph_outside_the_script_exits_130_in_one_line(tmp_path):
    bin_dir = fake_dot(tmp_path, "exec sleep 60\n")
    write_script(tmp_path, ONE_STRUCTURE)
    process = subprocess.Popen(gradviz_command("graph", "script.py", "-o", "g.svg"), cwd=tmp_path,
                               env=environment(bin_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _has_child_named(process.pid, "sleep"):
        time.sleep(0.01)  # dot (our sleeping fake) is running: gradviz waits on it
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr.strip() == "gradviz: error: interrupted (Ctrl-C)"
    assert not (tmp_path / "g.svg").exists()


def _has_child_named(pid, name):
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return False
    for child in children:
        try:
            if open(f"/proc/{child}/comm").read().strip() == name:
                return True
        except OSError:
            pass
    return False
