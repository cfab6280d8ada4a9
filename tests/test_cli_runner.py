"""The script runner: ``__main__`` semantics, restoring the interpreter, trimmed tracebacks, exit statuses."""

import os
import sys
import textwrap

import pytest

from gradviz.cli.runner import ScriptError, compile_script, location_of, run_code, user_traceback


def write(tmp_path, text, name="script.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run(path, args=()):
    return run_code(compile_script(path), path, args)


def test_script_runs_as_main_with_its_own_argv_and_path(tmp_path, capsys):
    path = write(tmp_path, """
        import sys
        print("name", __name__, "file", __file__ == sys.argv[0])
        print("argv", sys.argv[1:])
        print("path0", sys.path[0])
        print("main", sys.modules["__main__"].__dict__ is globals())
    """)
    result = run(path, ["--lr", "0.1", "x"])
    assert result.exit_code == 0 and result.exception is None
    assert capsys.readouterr().out.splitlines() == [
        "name __main__ file True",
        "argv ['--lr', '0.1', 'x']",
        f"path0 {tmp_path}",
        "main True",
    ]


def test_interpreter_state_is_restored_even_when_the_script_meddles(tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    path = write(tmp_path, f"""
        import os, sys
        os.chdir({str(other)!r})
        sys.path.insert(0, "/nonexistent")
        sys.argv.append("more")
        raise ValueError("boom")
    """)
    before = (os.getcwd(), list(sys.path), list(sys.argv), sys.modules["__main__"])
    result = run(path)
    assert result.exit_code == 1 and isinstance(result.exception, ValueError)
    assert (os.getcwd(), list(sys.path), list(sys.argv), sys.modules["__main__"]) == before


@pytest.mark.parametrize("call, code, message", [
    ("sys.exit(3)", 3, ""),
    ("sys.exit(0)", 0, ""),
    ("sys.exit()", 0, ""),
    ("sys.exit('bad config')", 1, "bad config"),
])
def test_sys_exit_is_honoured(tmp_path, call, code, message):
    path = write(tmp_path, f"import sys\n{call}\nprint('not reached')\n")
    result = run(path)
    assert (result.exit_code, result.exit_message, result.exception) == (code, message, None)


def test_traceback_keeps_only_user_frames(tmp_path):
    path = write(tmp_path, """
        import gradviz

        def make():
            x = gradviz.ones(3, requires_grad=True)
            return x * 2

        y = make()
        y.backward()
    """)
    result = run(path)
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "NonScalarBackwardError"
    lines = result.traceback.splitlines()
    assert lines == [
        "Traceback (most recent call last):",
        f'  File "{path}", line 9, in <module>',
        "    y.backward()",
        "gradviz.errors.NonScalarBackwardError: grad can be implicitly created only for scalar outputs",
    ]
    assert location_of(result.exception) == f"{path}:9"


def test_traceback_of_chained_exceptions_is_trimmed_too(tmp_path):
    path = write(tmp_path, """
        def inner():
            raise KeyError("k")

        try:
            inner()
        except KeyError as e:
            raise RuntimeError("outer") from e
    """)
    text = run(path).traceback
    assert "runner.py" not in text
    assert text.count(f'File "{path}"') == 3
    assert text.rstrip().endswith("RuntimeError: outer")
    assert "KeyError: 'k'" in text


def test_user_traceback_of_an_exception_without_user_frames_is_just_the_message():
    try:
        raise ValueError("x")
    except ValueError as exc:
        error = exc
    # this test file is user code here: its frame stays
    assert user_traceback(error).splitlines()[-1] == "ValueError: x"


def test_missing_script(tmp_path):
    missing = str(tmp_path / "nope.py")
    with pytest.raises(ScriptError) as info:
        compile_script(missing)
    assert str(info.value) == f"no such script `{missing}`"


def test_folder_instead_of_script(tmp_path):
    with pytest.raises(ScriptError) as info:
        compile_script(str(tmp_path))
    assert str(info.value) == f"`{tmp_path}` is a folder, not a Python script"


def test_syntax_error_is_one_line_with_file_and_line(tmp_path):
    path = write(tmp_path, "x = 1\nif x\n    pass\n")
    with pytest.raises(ScriptError) as info:
        compile_script(path)
    assert str(info.value) == f"syntax error in `{path}:2`: expected ':'"


def test_null_bytes_are_a_one_line_error(tmp_path):
    path = tmp_path / "bin.py"
    path.write_bytes(b"x = 1\x00\n")
    with pytest.raises(ScriptError) as info:
        compile_script(str(path))
    assert str(info.value) == f"syntax error in `{path}`: source code string cannot contain null bytes"


def test_script_globals_stay_alive_until_the_caller_drops_them(tmp_path):
    # the trace must see what the script still holds at its end (a `total_loss` keeping graphs alive)
    import gc
    import weakref

    path = write(tmp_path, "class Box:\n    pass\nkept = Box()\n")
    result = run(path)
    ref = weakref.ref(result.module.kept)
    gc.collect()
    assert ref() is not None
    result.module = None
    gc.collect()
    assert ref() is None
