"""How ``pytest -n N`` spreads the tests: like xdist's default ``--dist load`` (each test to whichever worker is
free), except that the tests sharing one costly run go to one worker together, so that run is made once instead
of once on each worker that draws one of them: a module fixture starting a multi-process job, or a sample's trace
kept per process (tests/shared_traces.py). Those groups go out first, the largest first, which also starts the
long jobs early; the other tests follow in collection order.

The groups are read off the test ids (the controller never imports a test module). xdist's own ``loadgroup`` would
read ``xdist_group`` marks, but xdist 3.8 renames the grouped tests through ``Item._nodeid``, which pytest 9 no
longer reads, so its groups are silently ignored there. A command line naming a ``--dist`` gets xdist's own."""

import os
import re

import pytest

# One OpenMP thread in every worker and in every process a test starts (torch reads the variable at import; a
# value the caller set is kept). Two workers share the two cores, and a second PyTorch thread per process spins
# waiting for a core the other worker holds: a sample that runs in 3 s alone took 12 s beside one busy core, and
# test_torch_parity with test_torch_exact_memory took 92 s in one process instead of 45. The multi-process tests
# already set it, as torchrun does.
os.environ.setdefault("OMP_NUM_THREADS", "1")



def pytest_configure(config):
    """Byte-compile gradviz once, in the controller before any worker starts, as ``pip install`` does for an
    installed package: the editable install is not compiled, and where ``PYTHONDONTWRITEBYTECODE`` is set (as on
    this machine) Python never writes the cache, so every ``gradviz run`` a test starts compiled gradviz's modules
    again (0.3-0.4 s of CPU a process, measured; the suite starts hundreds)."""
    if hasattr(config, "workerinput"):
        return
    import compileall
    from pathlib import Path

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "gradviz"), quiet=1)


# (a pattern of test ids, the group's name made from its match): the tests whose ids give one name share a worker
GROUPS = [
    # a sample's full trace on PyTorch in the default mode (tests/shared_traces.py): parity with gradviz's engine,
    # with the exact-memory mode and with light iterations
    (r"tests/test_torch_parity\.py::test_samples_give_the_same_diagnostics_on_both_engines\[(.+)\]", r"sample \1"),
    (r"tests/test_torch_exact_memory\.py::test_samples_give_the_same_diagnostics_as_the_default_mode\[(.+)\]",
     r"sample \1"),
    (r"tests/test_light_sees_everything\.py::test_every_light_iteration_names_what_a_full_trace_names"
     r"\[samples/(.+)-torch\]", r"sample \1"),
    # module fixtures that start multi-process jobs
    (r"tests/test_ddp_torch\.py::", "test_ddp_torch.py"),
    (r"tests/test_distributed\.py::(test_a_clean_two_rank_ddp_job|test_the_html_report_has_a_per_rank_section)",
     "test_distributed.py clean_pair"),
    (r"tests/test_torchrun_terminal\.py::(?!test_fail_on_never)", "test_torchrun_terminal.py default_run"),
    # files whose module fixture is costly (a browser, a notebook kernel, an RPC job, a Lightning fit, models traced
    # on PyTorch): the whole file, which also keeps the fixture's users together
    (r"tests/(test_html_browser|test_notebook_magic|test_render_real_models|test_rpc_trace|test_torch_names|"
     r"test_torch_lightning)\.py::", r"\1.py"),
    # the corpus: its PyTorch runs come from one process per worker, its gradviz runs are kept per script
    (r"tests/test_torch_scripts\.py::(test_script_prints_what_pytorch_prints|test_script_runs_unmodified_under_"
     r"gradviz)\[", "test_torch_scripts.py corpus"),
]
_GROUPS = [(re.compile(pattern), name) for pattern, name in GROUPS]


def group_of(nodeid):
    """The group a test id belongs to, or None (the test goes out alone)."""
    for pattern, name in _GROUPS:
        found = pattern.match(nodeid)
        if found:
            return found.expand(name)
    return None


def _dist_chosen(config):
    return any(arg == "--dist" or arg.startswith("--dist=") or arg in ("-d", "--loadgroup", "--loadscope",
               "--loadfile") for arg in config.invocation_params.args)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load" or _dist_chosen(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedRunScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with a scope per group above and one per lone test; scopes are handed out
        largest first (xdist's --loadscope-reorder, on by default)."""

        def _split_scope(self, nodeid):
            return group_of(nodeid) or nodeid

    return SharedRunScheduling(config, log)
