"""The diagnostics catalogue, as ``gradviz explain`` and docs/diagnostics.md read it: every registered code
(``registry.py``; each declared beside its rule in ``rules/``) with its default severity, one-line title and the
long explanation (what it means, a minimal example of the mistake, the fix).

Codes are stable kebab-case names: scripts, CI settings and docs refer to them, so never rename one. A rule may
lower the severity of one record (``graph-cut`` is an info when the cut was bridged by hand), never raise it.
"""

from collections.abc import Mapping

from ..document import vocabulary
from . import registry

SEVERITIES = vocabulary.SEVERITIES  # the document's severities, most severe first


class _Catalogue(Mapping):
    """A live, read-only view of the registry in catalogue order (``registry.catalogue()``): a rule module loaded
    later shows up in it. ``entry`` gives each code's value."""

    def __init__(self, entry):
        self._entry = entry

    def __getitem__(self, code):
        registry.catalogue()  # (loads every rule module)
        return self._entry(registry.CODES[code])

    def __iter__(self):
        return iter([c.code for c in registry.catalogue()])

    def __len__(self):
        return len(registry.catalogue())

    def __repr__(self):
        return repr(dict(self.items()))


CODES = _Catalogue(lambda c: (c.severity, c.title))  # code -> (default severity, one-line title)
EXPLANATIONS = _Catalogue(lambda c: c.explanation)  # code -> long explanation


def explain(code):
    """The long explanation of ``code`` (what it means, a minimal example, the fix), like ``rustc --explain``."""
    if code not in CODES:
        raise ValueError(f"unknown diagnostic code `{code}`; known codes: {', '.join(CODES)}")
    entry = registry.CODES[code]
    return f"{code} ({entry.severity}): {entry.title}\n\n{entry.explanation}"
