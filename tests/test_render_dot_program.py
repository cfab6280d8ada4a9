"""Where ``dot`` is: looked up on PATH once per PATH value (``shutil.which`` reads every folder of it), found
again when PATH changes, and never remembered as missing or once deleted."""

import os
import shutil

from gradviz.rendering.dot_program import dot_program
from tests.call_counting import counting


def _fake_dot(folder):
    folder.mkdir(exist_ok=True)
    exe = folder / "dot"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return str(exe)


def test_dot_is_looked_up_once_per_path(tmp_path, monkeypatch):
    exe = _fake_dot(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    lookups = counting(monkeypatch, shutil, "which")
    assert [dot_program() for _ in range(5)] == [exe] * 5
    assert len(lookups) == 1
    other = _fake_dot(tmp_path / "other")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "other"), str(tmp_path / "bin")]))
    assert dot_program() == other and len(lookups) == 2


def test_a_missing_dot_is_looked_for_again_and_a_deleted_one_is_not_returned(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    assert dot_program() is None
    exe = _fake_dot(folder)  # installed while the process runs (a notebook's kernel)
    assert dot_program() == exe
    os.remove(exe)
    assert dot_program() is None
