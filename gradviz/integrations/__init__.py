"""gradviz where training already runs: ``integrations.lightning.GradvizCallback`` (PyTorch Lightning),
``integrations.transformers.GradvizCallback`` (Hugging Face ``Trainer``). Each module imports its framework, so
importing this package imports neither."""

from ._fit import DiagnosticsFound, GradvizWarning

__all__ = ["DiagnosticsFound", "GradvizWarning"]
