"""``torch.cuda`` as on a machine without a GPU: gradviz's engine computes on the CPU only."""

from .device import as_device as _as_device


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def manual_seed(seed):
    """Seeding CUDA without CUDA does nothing, in PyTorch as here (scripts call it unconditionally)."""


def manual_seed_all(seed):
    """Seeding every GPU when there is none does nothing, in PyTorch as here."""


def current_device():
    _as_device("cuda")  # raises: there is no CUDA device to be current


def synchronize(device=None):
    _as_device("cuda")


def empty_cache():
    """Nothing is cached when CUDA was never initialised."""
