"""``torch.backends.mps``: Apple's GPU backend, never available to gradviz's CPU engine."""


def is_available():
    return False


def is_built():
    return False
