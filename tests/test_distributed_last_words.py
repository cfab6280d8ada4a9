"""A traced process told to stop (``distributed/last_words.py``), in a plain Python subprocess (no torch): the
document says who sent the signal, and a SIGTERM that arrives while the process writes its own document waits for
it instead of writing a second one over it."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    from gradviz.distributed import last_words
    last_words.block_early()
    out, ending = sys.argv[1], sys.argv[2] == "ending"
    words = last_words.LastWords()
    def write(name, where, when, sender):
        with open(out, "w") as f:
            json.dump({"by": "signal", "signal": name, "sender": sender, "line": where and where["line"]}, f)
    words.arm(write)
    if ending:
        words.ending()
    print("ready", flush=True)
    time.sleep(3)  # killed here, or (ending) writing its own document
    with open(out, "w") as f:
        json.dump({"by": "main"}, f)
    words.done()
    time.sleep(30)  # a SIGTERM that waited for the document ends the process now
""")


def run(tmp_path, mode):
    out = tmp_path / f"{mode}.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(out), mode], env=env, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "ready\n"
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    import json

    return json.loads(out.read_text())


def test_a_sigterm_mid_run_writes_the_document_with_the_line_and_the_sender(tmp_path):
    written = run(tmp_path, "running")
    sleep_line = SCRIPT.splitlines().index("time.sleep(3)  # killed here, or (ending) writing its own document") + 1
    assert written == {"by": "signal", "signal": "SIGTERM", "sender": os.getpid(), "line": sleep_line}


def test_a_sigterm_while_the_process_writes_its_own_document_waits_for_it(tmp_path):
    assert run(tmp_path, "ending") == {"by": "main"}
