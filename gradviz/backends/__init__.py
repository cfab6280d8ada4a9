"""``torch.backends``: the backends a script probes before choosing a device; none is available to gradviz."""

from . import mps

__all__ = ["mps"]
