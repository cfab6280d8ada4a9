"""``torch.backends``: the backends a script probes before choosing a device; none is available to gradviz."""

from . import cudnn, mps

__all__ = ["cudnn", "mps"]
