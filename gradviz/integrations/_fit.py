"""What the framework callbacks share: one traced fit, or the chosen steps of it.

``FitTrace`` starts ``gradviz.trace(engine="torch")`` where the callback says a fit (or a chosen step) begins,
stops it where it ends, writes the same report.json/report.html as ``gradviz run`` (``cli/artifacts.write_all``),
logs each diagnostic through the framework's logger, and then fails (``DiagnosticsFound``) or warns
(``GradvizWarning``) per ``fail_on``. The callbacks only translate their framework's hooks into ``begin`` /
``step_done`` / ``finish``.
"""

import os
import sys
import warnings

FAIL_ON = ("error", "warning", "never")
_LOG_LEVELS = {"error": 40, "warning": 30, "info": 20}


class DiagnosticsFound(RuntimeError):
    """The traced fit had diagnostics at or above ``fail_on``; ``diagnostics`` has their records."""

    def __init__(self, message, diagnostics, report_dir):
        super().__init__(message)
        self.diagnostics = diagnostics
        self.report_dir = report_dir


class GradvizWarning(UserWarning):
    """The traced fit had diagnostics below ``fail_on``: the fit goes on, the report says what they are."""


def check_steps(steps):
    """``None`` (the whole fit), ``N`` (the first N steps) or ``(first, last)`` (steps counted from 0, both
    included) as ``(first, last)``, ``last`` None for the whole fit; a one-line ``ValueError``/``TypeError``."""
    if steps is None:
        return 0, None
    if isinstance(steps, int) and not isinstance(steps, bool):
        if steps < 1:
            raise ValueError(f"steps must be at least 1 (the first N steps), got {steps}")
        return 0, steps - 1
    if isinstance(steps, (tuple, list)) and len(steps) == 2 and all(
            isinstance(s, int) and not isinstance(s, bool) for s in steps):
        first, last = steps
        if first < 0 or last < first:
            raise ValueError(f"steps=(first, last) needs 0 <= first <= last, got {tuple(steps)}")
        return first, last
    raise TypeError(f"steps must be None (the whole fit), an int N (the first N steps) or (first, last), got "
                    f"{steps!r}")


def check_fail_on(fail_on):
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    return fail_on


class FitTrace:
    """One traced fit. ``steps``: see ``check_steps``. ``trace_options``: ``gradviz.trace``'s ``light``,
    ``full_steps``, ``check_backward``, ``exact_memory`` (``light`` defaults to True, as for ``gradviz run``).
    ``pictures``: draw the graphs beside the reports, as ``gradviz run`` does."""

    def __init__(self, logger, steps=None, fail_on="error", pictures=True, trace_options=None):
        self.logger = logger
        self.first, self.last = check_steps(steps)
        self.whole_fit = steps is None
        self.fail_on = check_fail_on(fail_on)
        self.pictures = pictures
        self.trace_options = {"light": True, **(trace_options or {})}
        self.trace = None
        self.doc = None
        self.out_dir = None

    @property
    def active(self):
        return self.trace is not None and self.trace.active

    def begin(self, out_dir, step=None):
        """Start tracing (once) if ``step`` is one of the chosen ones (the whole fit: at its start)."""
        if self.trace is not None:
            return
        if not self.whole_fit and (step is None or step < self.first or step > self.last):
            return
        import gradviz

        self.out_dir = os.path.abspath(out_dir)
        self.trace = gradviz.trace(engine="torch", **self.trace_options)
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if main_file:
            self.trace.script = main_file
        self.trace.start()

    def step_done(self, steps_done):
        """After a step: stop when the chosen steps are all done (``steps_done`` counts the finished ones)."""
        if self.active and not self.whole_fit and steps_done > self.last:
            self._stop()

    def finish(self, exception=None, judge=True):
        """Stop (if still tracing), write the report, log the diagnostics; then, with ``judge``, raise
        ``DiagnosticsFound`` or warn per ``fail_on``. Returns the document (None when nothing was traced)."""
        if self.trace is None or self.doc is not None:
            return self.doc
        self._stop(exception)
        doc = self.doc = self.trace.to_dict()
        self._write(doc)
        self._log(doc)
        if judge:
            self.judge(doc)
        return doc

    def _stop(self, exception=None):
        if not self.active:
            return
        if exception is not None:  # recorded as if it had passed through ``with gradviz.trace()``
            self.trace.__exit__(type(exception), exception, exception.__traceback__)
        else:
            self.trace.stop()

    def _write(self, doc):
        from ..cli.artifacts import OutputFolderError, write_all

        try:
            write_all(doc, self.out_dir, draw=self.pictures)
        except OutputFolderError as exc:
            self.logger.error("gradviz: %s", exc)

    def _log(self, doc):
        for d in doc.get("diagnostics", []):
            self.logger.log(_LOG_LEVELS.get(d.get("severity"), 30), "gradviz: %s", describe(d))
        count = len(doc.get("diagnostics", []))
        summary = f"{count} diagnostic{'' if count == 1 else 's'}" if count else "no diagnostics"
        self.logger.info("gradviz: %s; report in %s", summary, os.path.join(self.out_dir, "report.html"))

    def judge(self, doc):
        diagnostics = doc.get("diagnostics", [])
        if not diagnostics:
            return
        failing = self.failing(doc)
        if failing:
            noun = "diagnostic" if len(failing) == 1 else "diagnostics"
            lines = "\n".join(f"  {describe(d)}" for d in failing)
            raise DiagnosticsFound(f"gradviz: {len(failing)} {noun} at or above `{self.fail_on}` (fail_on="
                                   f"{self.fail_on!r}); report in {self.out_dir}:\n{lines}", failing, self.out_dir)
        noun = "diagnostic" if len(diagnostics) == 1 else "diagnostics"
        warnings.warn(f"gradviz: {len(diagnostics)} {noun}, none at or above fail_on={self.fail_on!r} (first: "
                      f"{describe(diagnostics[0])}); report in {self.out_dir}", GradvizWarning, stacklevel=2)

    def failing(self, doc):
        """The diagnostics at or above ``fail_on`` (none for ``never``)."""
        if self.fail_on == "never":
            return []
        from ..document.vocabulary import severity_rank

        threshold = severity_rank(self.fail_on)
        return [d for d in doc.get("diagnostics", []) if severity_rank(d.get("severity")) >= threshold]


def describe(d):
    """``none-grad (warning) at train.py:12: `h.grad` is None…``: one diagnostic in one line."""
    loc = d.get("location") or {}
    where = f" at {loc['file']}:{loc['line']}" if loc.get("file") and loc.get("line") else ""
    message = str(d.get("message", "")).split("\n")[0]
    return f"{d['code']} ({d.get('severity')}){where}: {message}"


def counts(doc):
    """``{"gradviz/errors": n, "gradviz/warnings": n, "gradviz/infos": n}`` for a framework's metric logger."""
    out = {"gradviz/errors": 0, "gradviz/warnings": 0, "gradviz/infos": 0}
    for d in doc.get("diagnostics", []):
        key = {"error": "gradviz/errors", "warning": "gradviz/warnings"}.get(d.get("severity"), "gradviz/infos")
        out[key] += 1
    return out
