"""``torch.Generator``: a seedable source of random numbers (numpy's PCG64 underneath).

gradviz draws different numbers from PyTorch for the same seed; what carries over is reproducibility: the same
seed gives the same numbers within gradviz, and a generator passed to ``randperm`` or a ``DataLoader`` leaves
the default one alone.
"""

import numpy as np

from .device import as_device

# PyTorch's seed for a fresh Generator (a fresh one is deterministic there too).
DEFAULT_SEED = 67280421310721


class Generator:
    def __init__(self, device="cpu"):
        self.device = as_device(device)
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        """Reseed; returns the generator, so ``Generator().manual_seed(0)`` is usable inline."""
        seed = int(seed)
        self._seed = seed
        # numpy seeds must be non-negative; PyTorch accepts negative seeds and wraps them to 64 bits
        self._rng = np.random.default_rng(seed % 2**64)
        return self

    def seed(self):
        """Reseed from fresh entropy and return the new seed."""
        return self.manual_seed(_entropy_seed())._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 tensor (PyTorch's form), restorable with ``set_state``."""
        from .factories import tensor

        raw = repr(self._rng.bit_generator.state).encode()
        return tensor(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, state):
        import ast

        text = bytes(np.asarray(state._data, dtype=np.uint8)).decode()
        self._rng.bit_generator.state = ast.literal_eval(text)
        return self

    def __repr__(self):
        return f"<gradviz.Generator seed={self._seed}>"


def _entropy_seed():
    return int(np.random.SeedSequence().entropy) % 2**63


# The default generator starts from fresh entropy (as gradviz always has); manual_seed makes it reproducible.
default_generator = Generator()
default_generator.manual_seed(_entropy_seed())


def initial_seed():
    """The seed the default generator started from (or was last given with ``manual_seed``)."""
    return default_generator.initial_seed()


def seed():
    """Reseed the default generator from fresh entropy; returns the seed."""
    return default_generator.seed()


def get_rng_state():
    """The default generator's state as a uint8 tensor, for ``set_rng_state``."""
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


# ----- torch.use_deterministic_algorithms: every gradviz op is deterministic already (numpy on the CPU) --------
_deterministic = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded and reported back as in PyTorch; there is no nondeterministic op to refuse."""
    _deterministic.update(enabled=bool(mode), warn_only=bool(warn_only))


def are_deterministic_algorithms_enabled():
    return _deterministic["enabled"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]
