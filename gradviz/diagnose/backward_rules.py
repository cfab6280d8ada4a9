"""What the rules about errors share (``rules/nonscalar_backward.py``, ``stale_version.py``, ``graph_freed.py``,
``no_requires_grad.py``, ``leaf_inplace.py``, ``optimize_non_leaf.py``): the backward calls that raised a code,
a failed backward's root, and the exception the script died of."""

from ..document import error_code


def failed_with(index, code):
    """The backward calls whose error has diagnostic ``code``, in order."""
    return [b for b in index.backwards if error_code(b.get("error")) == code]


def backward_root(index, b):
    """The root a backward call is about: its first root with more than one element, else its first root."""
    roots = b.get("roots") or [None]
    for r in roots:
        v = index.variables.get(r)
        if v is not None and _numel(v) != 1:
            return r
    return roots[0]


def _numel(v):
    n = 1
    for d in v.get("shape") or ():
        n *= d
    return n


def script_exception(index, code, *, unless_a_backward_raised=True):
    """The exception the script died of when its diagnostic code is ``code``, else None; also None when a backward
    record raised the same code (that record explains it), unless ``unless_a_backward_raised`` is False."""
    exc = (index.doc.get("status") or {}).get("exception")
    if error_code(exc) != code:
        return None
    if unless_a_backward_raised and any(error_code(b.get("error")) == code for b in index.backwards):
        return None
    return exc


def exception_variables(exc):
    return [exc["variable"]] if exc.get("variable") is not None else []


def script_stopped(index, out, code):
    """The exception with ``code`` the script died of, that no backward record explains: said as it is."""
    exc = script_exception(index, code)
    if exc is None:
        return
    out.add(code, f"the script stopped: {exc.get('message')}", "See the explanation of this error.",
            exc.get("location"), variables=exception_variables(exc), details={"exception": exc.get("type")},
            order=(3, 0))
