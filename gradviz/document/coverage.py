"""How much of a run a trace document saw: whether it saw any autograd work at all, and whether its lack of
diagnostics may read as an all-clear (it saw work, and nothing is listed as beyond its sight in ``unseen``)."""

NO_AUTOGRAD = "no-autograd"


def saw_autograd(doc):
    """Whether the trace saw a graph built or a backward call run (counted ones included)."""
    dropped = doc.get("dropped") or {}
    return bool(doc.get("graphs") or doc.get("nodes") or doc.get("backwards") or dropped.get("backwards")
                or dropped.get("nodes") or any(s.get("count") for s in doc.get("structures") or ()))


def all_clear(doc):
    """No diagnostics, and nothing that makes that silence unreliable: work was seen and nothing is unseen."""
    return not doc.get("diagnostics") and saw_autograd(doc) and not doc.get("unseen")


def no_autograd_entry(doc):
    """The ``unseen`` entry of kind ``no-autograd``, or None."""
    return next((e for e in doc.get("unseen") or () if e.get("kind") == NO_AUTOGRAD), None)
