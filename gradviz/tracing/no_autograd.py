"""A trace that saw no graph and no backward says so in its document (an ``unseen`` entry of kind
``no-autograd``), with the likely reason the tracer can tell: the engines it watched against the engines
imported. ``gradviz run`` knows more (the script's own imports) and words the reason itself (cli/blind_spots.py)."""

import sys

from ..document.coverage import NO_AUTOGRAD, saw_autograd

WHAT = "autograd work: no graph was built and no backward ran while the trace watched"


def add_no_autograd(doc):
    """Append the ``no-autograd`` entry to ``doc["unseen"]`` when the document saw no autograd work."""
    if saw_autograd(doc):
        return
    watched = _watched(doc)
    if "torch" in sys.modules and "torch" not in watched:
        how = "torch is imported, but the trace watched gradviz's engine only"
        advice = "trace PyTorch with gradviz.trace(engine=\"torch\") (or \"auto\")"
    else:
        how = (f"no operation on a tensor that requires grad ran on the engine watched ({', '.join(watched)}), "
               "or it ran elsewhere (another engine, a child process)")
        advice = ("check that the traced code builds a graph (a parameter or an input with requires_grad=True) "
                  "and runs on the engine the trace watches")
    doc.setdefault("unseen", []).append({"kind": NO_AUTOGRAD, "what": WHAT, "count": 1, "how": how,
                                         "location": None, "advice": advice})


def _watched(doc):
    engine = doc.get("engine") or {}
    names = [e.get("name") for e in engine.get("engines") or [engine]]
    return [n for n in names if n] or ["gradviz"]
