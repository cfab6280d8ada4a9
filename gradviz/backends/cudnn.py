"""``torch.backends.cudnn``: never available to gradviz's CPU engine. Seeding boilerplate sets ``deterministic``
and ``benchmark`` here; gradviz's numpy engine is deterministic whatever they hold."""

enabled = True
deterministic = False
benchmark = False


def is_available():
    return False


def version():
    return None
