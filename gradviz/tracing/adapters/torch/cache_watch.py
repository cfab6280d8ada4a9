"""In-place writes into views of cached tensors, on PyTorch (``tracing/cache_writes.py`` says what is kept and
why). Called by the two places that already see each in-place write of the user's code: the light watch's
wrappers (``watch.TorchWatch.written``) and the full handler (``events.inplace``); nothing else is patched."""

from ...cache_writes import READS_OLD
from ...data_origin import data_origin
from .frames import user_frame


def cache_write(builder, t, op, location, stored=None):
    """``t`` was written in place by ``op`` at ``location``: handed to the builder's
    ``CacheWrites`` when it is a view of a tensor that needs no gradient and the op re-reads the old value.
    ``stored``: for ``__setitem__``, the value stored (a view just written, stored back: ``t[i] += v``)."""
    if op not in READS_OLD:
        if stored is not None and op == "__setitem__":
            facts = getattr(builder, "training", None)
            held = t._base if t._base is not None else t
            if facts is not None and getattr(stored, "_base", None) is held:  # a view of what it is stored into
                facts.cache_writes.stored_back(stored)
        return
    base = t._base
    if base is None or t.requires_grad or base.requires_grad or t.numel() >= base.numel():
        return
    facts = getattr(builder, "training", None)
    if facts is None:
        return

    def describe():
        frame = user_frame(1)  # (the writing line's frame: the names are looked up from it outwards)
        if frame is None:
            return tuple(base.shape), None, None
        return (tuple(base.shape), data_origin(frame, base, lambda other: False),
                data_origin(frame, t, lambda other: False))

    facts.cache_writes.write(location, op, t, base, (t.storage_offset(), tuple(t.shape), t.stride()),
                             builder.current_iteration(), describe)
