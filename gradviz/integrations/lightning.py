"""``Trainer(callbacks=[GradvizCallback()])``: a PyTorch Lightning fit traced by gradviz.

The whole fit by default, or the chosen steps (``steps=N``: the first N; ``steps=(first, last)``: counted from 0
as ``trainer.global_step`` counts them, both included). When the fit ends (or raises), report.json and
report.html are written to ``out_dir`` (default: ``<trainer.default_root_dir>/gradviz``), each diagnostic is
logged through Lightning's logger (``lightning.pytorch.callbacks.gradviz``) and its counts through the trainer's
loggers (``gradviz/errors``, ``gradviz/warnings``, ``gradviz/infos``); then ``fail_on`` decides: diagnostics at
or above it raise ``DiagnosticsFound`` out of ``trainer.fit``, others are a ``GradvizWarning``. Only the global
rank 0 process traces.
"""

import logging

try:
    from lightning.pytorch.callbacks import Callback
    _LOGGER = "lightning.pytorch.callbacks.gradviz"
except ImportError:  # the older package name
    try:
        from pytorch_lightning.callbacks import Callback
        _LOGGER = "pytorch_lightning.callbacks.gradviz"
    except ImportError:
        raise ImportError("gradviz.integrations.lightning needs PyTorch Lightning: pip install lightning") from None

from ._fit import DiagnosticsFound, FitTrace, GradvizWarning, counts

__all__ = ["GradvizCallback", "DiagnosticsFound", "GradvizWarning"]


class GradvizCallback(Callback):
    """Trace a Lightning fit (or ``steps`` of it) with gradviz; see the module's docstring.

    ``fail_on``: ``"error"`` (default), ``"warning"`` or ``"never"``. ``light`` / ``full_steps``: as
    ``gradviz run --light/--full`` (light by default: every op of the first and sampled steps, the others
    watched cheaply); ``pictures``: draw the graphs beside the reports.
    """

    def __init__(self, out_dir=None, steps=None, fail_on="error", light=True, full_steps=3, check_backward=True,
                 exact_memory=False, pictures=True):
        self.out_dir = out_dir
        self.fit = FitTrace(logging.getLogger(_LOGGER), steps=steps, fail_on=fail_on, pictures=pictures,
                            trace_options={"light": light, "full_steps": full_steps,
                                           "check_backward": check_backward, "exact_memory": exact_memory})

    @property
    def document(self):
        """The trace document of the last fit (None before it ended)."""
        return self.fit.doc

    def _folder(self, trainer):
        import os

        return self.out_dir or os.path.join(trainer.default_root_dir, "gradviz")

    def on_fit_start(self, trainer, pl_module):
        if trainer.is_global_zero and self.fit.whole_fit:
            self.fit.begin(self._folder(trainer))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.is_global_zero and not self.fit.whole_fit:
            self.fit.begin(self._folder(trainer), trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.fit.step_done(trainer.global_step)

    def on_fit_end(self, trainer, pl_module):
        doc = self.fit.finish(judge=False)
        if doc is None:
            return
        for lg in trainer.loggers:  # the counts beside the fit's own metrics
            lg.log_metrics(counts(doc), step=trainer.global_step)
        self.fit.judge(doc)

    def on_exception(self, trainer, pl_module, exception):
        if isinstance(exception, DiagnosticsFound):  # ours, from on_fit_end: the report is written already
            return
        self.fit.finish(exception, judge=False)  # the fit's own exception goes on; the report says where it was
