"""``gradviz torchrun`` and ``gradviz run --nproc-per-node`` on bad input: one line and a non-zero exit, nothing
launched; and how the launcher's command is built from torchrun's own parser."""

import pytest
from click.testing import CliRunner

from gradviz.cli import main
from gradviz.distributed.launch import split_torchrun_args, torchrun_command


@pytest.mark.parametrize("args, message", [
    (["torchrun", "--nproc-per-node", "2"], "gradviz: error: no script to run: give SCRIPT after torchrun's options"),
    (["torchrun", "--nproc-per-node", "2", "missing.py"], "gradviz: error: no such script `missing.py`"),
    (["torchrun", "--bogus", "3", "x.py"], "gradviz: error: torchrun options: unrecognized arguments: --bogus"),
    (["torchrun", "--no-python", "echo"], "gradviz: error: gradviz torchrun runs Python: --no-python is not supported"),
    (["torchrun", "-m", "nosuchpkg.train"],
     "gradviz: error: no module named `nosuchpkg.train` (looked for from `{cwd}`, as `python -m` does)"),
    (["run", "--nproc-per-node", "2", "--torch", "x.py"],
     "gradviz: error: --nproc-per-node runs a torchrun job, on PyTorch: drop --engine gradviz / --torch"),
    (["run", "--timeout", "3", "x.py"],
     "gradviz: error: --timeout applies to a job: give --nproc-per-node too (or use `gradviz torchrun`)"),
])
def test_bad_launch_input_is_one_line(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.stderr == message.format(cwd=tmp_path) + "\n"
    assert not (tmp_path / "gradviz-out").exists()


def test_torchrun_options_pass_through_and_each_rank_runs_the_rank_worker():
    argv = ["--standalone", "--nproc-per-node=2", "--max-restarts", "0", "train.py", "--lr", "1", "--standalone"]
    options, script, script_args, as_module = split_torchrun_args(argv)
    assert not as_module
    assert options == ["--standalone", "--nproc-per-node=2", "--max-restarts", "0"]
    assert (script, script_args) == ("train.py", ["--lr", "1", "--standalone"])
    command = torchrun_command(options, script, script_args)
    assert command[1:3] == ["-m", "torch.distributed.run"]
    assert command[3:] == [*options, "-m", "gradviz.distributed.rank_worker", "train.py", "--lr", "1", "--standalone"]


def test_torchrun_m_hands_the_module_to_each_rank_worker():
    options, script, script_args, as_module = split_torchrun_args(["--standalone", "-m", "pkg.train", "--lr", "1"])
    assert (options, script, script_args, as_module) == (["--standalone"], "pkg.train", ["--lr", "1"], True)
    command = torchrun_command(options, script, script_args, as_module)
    assert command[3:] == ["--standalone", "-m", "gradviz.distributed.rank_worker", "-m", "pkg.train", "--lr", "1"]
