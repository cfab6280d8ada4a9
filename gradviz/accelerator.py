"""``torch.accelerator``: there is none; gradviz's engine computes on the CPU."""


def is_available():
    return False


def device_count():
    return 0


def current_accelerator(check_available=False):
    return None
