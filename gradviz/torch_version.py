"""``TorchVersion``: a version string that compares as a version, as ``torch.__version__`` does.

``torch.__version__ >= "2.0"`` and ``torch.__version__ < (2, 1)`` compare release numbers, not characters
("2.13" > "2.9"). The rules are the PEP 440 subset version strings in scripts use: release numbers (missing
ones are 0), then dev < a < b < rc < final, then a local label (``+cpu``) after the same public version.
Anything else is compared as the plain string it is.
"""

import re

_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|rc|alpha|beta|c|pre|preview)[-_.]?(\d*))?"
                      r"(?:[-_.]?post[-_.]?(\d*))?(?:[-_.]?dev[-_.]?(\d*))?(?:\+([a-z0-9.]+))?$", re.IGNORECASE)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def _version_key(text):
    """A tuple that orders version strings as versions, or None when ``text`` is not one."""
    match = _VERSION.match(str(text).strip())
    if match is None:
        return None
    release, pre, pre_n, post, dev, local = match.groups()
    numbers = [int(n) for n in release.split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()  # 2.0 == 2.0.0
    if pre:
        phase = (_PRE[pre.lower()], int(pre_n or 0))
    elif dev is not None and post is None:
        phase = (-1, 0)  # 2.1.dev0 comes before 2.1a0
    else:
        phase = (3, 0)
    post_key = int(post or 0) if post is not None else -1
    dev_key = int(dev or 0) if dev is not None else float("inf")
    local_key = tuple((0, int(p), "") if p.isdigit() else (-1, 0, p) for p in re.split(r"[.]", local)) \
        if local else ()
    return tuple(numbers), phase, post_key, dev_key, local_key


def _other_key(other):
    if isinstance(other, tuple) and all(isinstance(n, int) for n in other):
        other = ".".join(str(n) for n in other)
    if isinstance(other, (list, tuple)):
        other = ".".join(str(n) for n in other)
    return _version_key(other) if isinstance(other, str) else None


class TorchVersion(str):
    """A ``str`` (``.split(".")``, printing, ``startswith`` all work) whose comparisons are version comparisons
    against strings, tuples of ints and other versions."""

    def _cmp(self, other, op):
        mine, theirs = _version_key(self), _other_key(other)
        if mine is None or theirs is None:
            if isinstance(other, str):
                return op(str(self), str(other))
            return NotImplemented
        return op(_padded(mine, theirs), _padded(theirs, mine))

    def __lt__(self, other):
        return self._cmp(other, lambda a, b: a < b)

    def __le__(self, other):
        return self._cmp(other, lambda a, b: a <= b)

    def __gt__(self, other):
        return self._cmp(other, lambda a, b: a > b)

    def __ge__(self, other):
        return self._cmp(other, lambda a, b: a >= b)

    def __eq__(self, other):
        result = self._cmp(other, lambda a, b: a == b)
        return str.__eq__(self, other) if result is NotImplemented else result

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = str.__hash__


def _padded(key, other):
    """``key`` with its release numbers padded with zeros to the other's length (2.0 == 2.0.0)."""
    width = max(len(key[0]), len(other[0]))
    return (key[0] + (0,) * (width - len(key[0])),) + key[1:]


__all__ = ["TorchVersion"]
