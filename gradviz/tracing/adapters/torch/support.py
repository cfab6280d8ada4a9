"""Which real torch versions gradviz's torch engine accepts, and the one line saying why when it does not.

Inside the accepted range, what differs between torch lines is found by probing (``torch/compat``), so a 2.x
newer than the newest tested is tried, not refused; a new major version, or one older than ``OLDEST``, is
refused. Kept apart from ``gradviz.torch_version``, which the ``import torch`` shim exposes as
``torch.torch_version`` (every public name there would become a PyTorch name).
"""

from ....torch_version import TorchVersion, _version_key

OLDEST = "2.4"
NEWEST_TESTED = "2.15.0"
PIP_TORCH = f"pip install 'torch>={OLDEST},<={NEWEST_TESTED}'"


def unsupported(version):
    """The one line that says why gradviz's torch engine cannot watch torch ``version``, or None when it can."""
    v = TorchVersion(version)
    key = _version_key(v)
    if key is None:
        return f"torch reports an unreadable version `{version}`: {PIP_TORCH}"
    if v < OLDEST:
        return f"gradviz's torch engine needs torch {OLDEST} or later, found torch {version}: {PIP_TORCH}"
    if key[0][0] != 2:
        return (f"gradviz's torch engine is written for torch 2 ({OLDEST} to {NEWEST_TESTED} tested), found torch "
                f"{version}: {PIP_TORCH}")
    return None
