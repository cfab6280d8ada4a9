"""The document's ``training`` section read for the mode rules (train-mode-not-restored, eval-mode-forgotten):
each mode-dependent module's runs of calls, and the ``train()``/``eval()`` switches that set it, in order."""


def modules(doc):
    return ((doc.get("training") or {}).get("modules")) or []


def switches_touching(doc, path):
    """The switches whose module set ``path`` (it is in their ``touches``), in order."""
    return sorted((s for s in (doc.get("training") or {}).get("switches") or () if path in (s.get("touches") or ())),
                  key=lambda s: s.get("order", 0))


def root_of(path):
    """``model`` for ``model.encoder.drop``: the name the user's code calls."""
    return (path or "model").split(".")[0]


def describe(found):
    """`model.2` (Dropout), `model.4` (BatchNorm1d): the modules a finding is about."""
    return ", ".join(f"`{m['module']}` ({m['class']})" for m in found)
