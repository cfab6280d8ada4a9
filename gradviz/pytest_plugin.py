"""gradviz's pytest plugin (registered through the ``pytest11`` entry point, so installing gradviz installs it).

- ``pytest --gradviz``: each test's call runs under ``gradviz.trace()``; the diagnostics are listed in a
  "gradviz diagnostics" section of the summary and under a failed test's report.
- ``--gradviz-fail-on error|warning``: a test whose trace has a diagnostic at or above that severity fails (it
  implies ``--gradviz``); ``never`` (the default) only reports.
- ``--gradviz-out DIR``: report.json and report.html of every test with diagnostics, in ``DIR/<test>/``.
- The ``gradviz_trace`` fixture, for explicit use without ``--gradviz``: ``with gradviz_trace: train_step()``
  traces the block and fails the test there on an error-level diagnostic (``gradviz_trace(fail_on="warning",
  engine="torch", light=False)`` for other settings); ``gradviz_trace.diagnostics`` lists what it found.

Nothing here loads gradviz's engine or torch unless a test is traced: the plugin is imported by every pytest run
of a project where gradviz is installed.
"""

import os
import re

import pytest

FAIL_ON = ("error", "warning", "never")
_ENGINES = ("auto", "gradviz", "torch")
_FOUND = "gradviz"  # the user_properties key: the diagnostics' lines travel with the report (xdist too)


def pytest_addoption(parser, pluginmanager):
    _rewrite_only_this_module(pluginmanager)
    group = parser.getgroup("gradviz", "gradviz: autograd diagnostics for each test")
    group.addoption("--gradviz", action="store_true", default=False,
                    help="Trace each test's call with gradviz and report its autograd diagnostics in the summary.")
    group.addoption("--gradviz-fail-on", choices=FAIL_ON, default=None,
                    help="Fail a traced test with a diagnostic at or above this severity (implies --gradviz; "
                         "default: never). Also the gradviz_trace fixture's default (there: error).")
    group.addoption("--gradviz-engine", choices=_ENGINES, default="auto",
                    help="The engine traced: auto (gradviz's, and PyTorch once imported), gradviz or torch.")
    group.addoption("--gradviz-light", action="store_true", default=False,
                    help="Record every op only on a test's first and sampled iterations (long training tests).")
    group.addoption("--gradviz-out", default=None, metavar="DIR",
                    help="Write report.json and report.html of each test with diagnostics into DIR/<test>/.")


def _rewrite_only_this_module(pluginmanager):
    """pytest marks every package of a plugin's distribution for assert rewriting: with this plugin installed, each
    run would rewrite all of gradviz's modules (again on every run where bytecode is not cached, e.g. under
    PYTHONDONTWRITEBYTECODE), though only test files need it. Keep the mark on this module alone; gradviz's own
    code has no asserts a test reads. pytest has no public way to unmark, so any change of its internals leaves
    the marks as they were."""
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    cache = getattr(hook, "_marked_for_rewrite_cache", None)
    if not isinstance(marked, set) or not isinstance(cache, dict) or _PACKAGE not in marked:
        return
    marked.discard(_PACKAGE)
    marked.add(__name__)
    cache.clear()


_PACKAGE = __name__.partition(".")[0]
_LINES = pytest.StashKey()  # on an item: its diagnostics, one line each


def pytest_configure(config):
    config.addinivalue_line("markers", "gradviz_skip: do not trace this test under --gradviz")


def _tracing_each_test(config):
    return config.getoption("gradviz") or config.getoption("gradviz_fail_on") in ("error", "warning")


def _trace_options(config):
    return {"engine": config.getoption("gradviz_engine"), "light": config.getoption("gradviz_light")}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    config = item.config
    if (not _tracing_each_test(config) or "gradviz_trace" in getattr(item, "fixturenames", ())
            or item.get_closest_marker("gradviz_skip")):
        return (yield)
    import gradviz

    tr = gradviz.trace(**_trace_options(config))
    tr.start()
    try:
        outcome = yield
    except BaseException as exc:
        tr.__exit__(type(exc), exc, exc.__traceback__)
        _record(item, tr.to_dict())
        raise
    tr.stop()
    failing = _record(item, tr.to_dict(), config.getoption("gradviz_fail_on") or "never")
    if failing:
        raise DiagnosticsFailed(failure_message(failing, config.getoption("gradviz_fail_on")))
    return outcome


class DiagnosticsFailed(AssertionError):
    """A traced test had diagnostics at or above ``fail_on``."""


def _record(item, doc, fail_on="never"):
    """Keep ``doc``'s diagnostics on the item (for its report and the summary), write its report when asked;
    returns those at or above ``fail_on``."""
    diagnostics = doc.get("diagnostics", [])
    if diagnostics:
        lines = item.stash.setdefault(_LINES, [])
        lines.extend(describe(d) for d in diagnostics)
        out = item.config.getoption("gradviz_out")
        if out:
            problem = _write(doc, os.path.join(out, _folder_name(item.nodeid)))
            if problem:
                lines.append(f"report not written: {problem}")
    return failing(diagnostics, fail_on)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    lines = item.stash.get(_LINES, None)
    if call.when == "call" and lines:
        report.user_properties.append((_FOUND, list(lines)))
        report.sections.append(("gradviz diagnostics", "\n".join(lines)))
    return report


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    found = []  # (nodeid, lines), from the reports themselves: under xdist they come from the workers
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            found += [(report.nodeid, lines) for key, lines in getattr(report, "user_properties", ()) if key == _FOUND]
    if not found and not _tracing_each_test(config):
        return
    terminalreporter.write_sep("=", "gradviz diagnostics")
    for nodeid, lines in found:
        for line in lines:
            terminalreporter.write_line(f"{nodeid}: {line}")
    tests = len(found)
    if tests:
        count = sum(len(lines) for _, lines in found)
        terminalreporter.write_line(f"gradviz: {count} diagnostic{'s' if count != 1 else ''} in {tests} "
                                    f"test{'s' if tests != 1 else ''}")
    else:
        terminalreporter.write_line("gradviz: no diagnostics")


class GradvizTrace:
    """The ``gradviz_trace`` fixture: ``with gradviz_trace:`` or ``with gradviz_trace(fail_on=..., **trace
    options):`` traces the block; at its end the test fails on a diagnostic at or above ``fail_on``."""

    def __init__(self, item, fail_on, options):
        self._item = item
        self._fail_on = fail_on
        self._options = options
        self._stack = []
        self.documents = []

    def __call__(self, fail_on=None, **options):
        __tracebackhide__ = True  # a failure is shown at the test's line
        if fail_on is not None and fail_on not in FAIL_ON:
            raise ValueError(f"gradviz_trace: fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
        return _Block(self, fail_on or self._fail_on, {**self._options, **options})

    def __enter__(self):
        block = self()
        self._stack.append(block)
        return block.__enter__()

    def __exit__(self, *exc_info):
        __tracebackhide__ = True
        return self._stack.pop().__exit__(*exc_info)

    @property
    def diagnostics(self):
        """Every diagnostic of this test's traced blocks, in order."""
        return [d for doc in self.documents for d in doc.get("diagnostics", [])]


class _Block:
    def __init__(self, owner, fail_on, options):
        self.owner, self.fail_on, self.options = owner, fail_on, options
        self.trace = None

    def __enter__(self):
        import gradviz

        self.trace = gradviz.trace(**self.options)
        self.trace.start()
        return self.trace

    def __exit__(self, exc_type, exc, tb):
        __tracebackhide__ = True
        self.trace.__exit__(exc_type, exc, tb)
        doc = self.trace.to_dict()
        self.owner.documents.append(doc)
        bad = _record(self.owner._item, doc, self.fail_on)
        if bad and exc is None:
            raise DiagnosticsFailed(failure_message(bad, self.fail_on))
        return False


@pytest.fixture
def gradviz_trace(request):
    """Trace a block of the test with gradviz (``with gradviz_trace: ...``); the test fails at the block's end on
    a diagnostic at or above ``fail_on`` (``--gradviz-fail-on``, else ``error``)."""
    config = request.config
    return GradvizTrace(request.node, config.getoption("gradviz_fail_on") or "error", _trace_options(config))


def failing(diagnostics, fail_on):
    if fail_on == "never":
        return []
    from .document.vocabulary import severity_rank

    threshold = severity_rank(fail_on)
    return [d for d in diagnostics if severity_rank(d.get("severity")) >= threshold]


def failure_message(diagnostics, fail_on):
    noun = "diagnostic" if len(diagnostics) == 1 else "diagnostics"
    lines = "\n".join(f"  {describe(d)}" for d in diagnostics)
    return f"gradviz: {len(diagnostics)} {noun} at or above `{fail_on}`:\n{lines}"


def describe(d):
    from .integrations._fit import describe as one_line

    return one_line(d)


def _folder_name(nodeid):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_") or "test"


def _write(doc, folder):
    """report.json and report.html into ``folder``; the one-line reason when they can't be (said in the summary:
    the test's outcome is not the report's)."""
    from .cli.artifacts import OutputFolderError, write_all

    try:
        write_all(doc, folder, draw=False)
    except OutputFolderError as exc:
        return str(exc)
    return None
