"""``Trainer(callbacks=[GradvizCallback()])``: a Hugging Face ``Trainer.train()`` traced by gradviz.

The whole training by default, or the chosen steps (``steps=N``: the first N optimizer steps; ``steps=(first,
last)``: counted from 0 as ``state.global_step`` counts them, both included). When training ends, report.json and
report.html are written to ``out_dir`` (default: ``<args.output_dir>/gradviz``), each diagnostic is logged through
transformers' logger (``transformers.integrations.gradviz``, under transformers' verbosity settings), the counts
are added to ``state.log_history``; then ``fail_on`` decides: diagnostics at or above it raise
``DiagnosticsFound`` out of ``trainer.train()``, others are a ``GradvizWarning``. Only the world's main process
traces.

``Trainer`` has no callback for an exception: when ``train()`` raises, call ``callback.finish(exception)`` (in an
``except`` block) to stop the trace and write what it saw.
"""

import os

try:
    from transformers import TrainerCallback
    from transformers.utils import logging as _hf_logging
except ImportError:
    raise ImportError("gradviz.integrations.transformers needs transformers: pip install transformers") from None

from ._fit import DiagnosticsFound, FitTrace, GradvizWarning, counts

__all__ = ["GradvizCallback", "DiagnosticsFound", "GradvizWarning"]


class GradvizCallback(TrainerCallback):
    """Trace a Hugging Face training run (or ``steps`` of it) with gradviz; see the module's docstring.

    ``fail_on``: ``"error"`` (default), ``"warning"`` or ``"never"``. ``light`` / ``full_steps``: as
    ``gradviz run --light/--full``; ``pictures``: draw the graphs beside the reports.
    """

    def __init__(self, out_dir=None, steps=None, fail_on="error", light=True, full_steps=3, check_backward=True,
                 exact_memory=False, pictures=True):
        self.out_dir = out_dir
        self.fit = FitTrace(_hf_logging.get_logger("transformers.integrations.gradviz"), steps=steps,
                            fail_on=fail_on, pictures=pictures,
                            trace_options={"light": light, "full_steps": full_steps,
                                           "check_backward": check_backward, "exact_memory": exact_memory})

    @property
    def document(self):
        """The trace document of the last training run (None before it ended)."""
        return self.fit.doc

    def _folder(self, args):
        if self.out_dir:
            return self.out_dir
        return os.path.join(args.output_dir, "gradviz") if getattr(args, "output_dir", None) else \
            os.path.join("gradviz-out", "transformers")

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.fit.whole_fit:
            self.fit.begin(self._folder(args))

    def on_step_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and not self.fit.whole_fit:
            self.fit.begin(self._folder(args), state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        self.fit.step_done(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        doc = self.fit.finish(judge=False)
        if doc is None:
            return
        state.log_history.append({**counts(doc), "step": state.global_step})
        self.fit.judge(doc)

    def finish(self, exception=None):
        """Stop the trace and write its report now (after ``train()`` raised); returns the document."""
        return self.fit.finish(exception, judge=False)
