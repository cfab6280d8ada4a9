"""``torch.version`` under ``gradviz run --torch``: which PyTorch gradviz's engine follows, and that it is gradviz.

``__version__`` is the PyTorch API level gradviz's engine follows, with gradviz's own version as the local label
(``2.13.0+gradviz.0.1.0``), so version checks in scripts (``torch.__version__ >= "2.0"``) see the API they get,
and printing it says it is not PyTorch. gradviz's own version stays ``gradviz.__version__``. No GPU toolkit:
``cuda``, ``hip``, ``rocm`` and ``xpu`` are None, as in a CPU-only PyTorch build.
"""

from ._version import __version__ as _gradviz_version
from .torch_version import TorchVersion as _TorchVersion

# The PyTorch release whose names, semantics and messages gradviz's engine is checked against (the oracle tests).
TORCH_API_LEVEL = "2.13.0"

__version__ = _TorchVersion(f"{TORCH_API_LEVEL}+gradviz.{_gradviz_version}")
debug = False
cuda = None
hip = None
rocm = None
xpu = None

