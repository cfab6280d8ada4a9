"""dataset-mutated-inplace: an in-place transform of a view of a cached tensor (``x = self.data[i]; x.sub_(m)``
in a Dataset's ``__getitem__``) writes into the cache: every epoch transforms the already transformed values
again. Read from the ``training`` section's ``dataset_mutated_inplace``: the adapters see each in-place write of
the user's code (light iterations included) and note the part of a tensor needing no gradient that one line
writes again, on a later iteration, through a new view (``tracing/cache_writes.py``)."""

import re

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

DATASET_MUTATED_INPLACE = Code(
    "dataset-mutated-inplace", "warning",
    "an in-place transform of a cached tensor's view: the data set changes every epoch",
    explanation="""\
Indexing a tensor (`self.data[i]`, `self.data[i:j]`) returns a view: the same memory, not a copy. An in-place
op on that view (`x.sub_(mean)`, `x.mul_(2)`, `x += noise`) writes into the cached tensor itself. In a
Dataset's `__getitem__` that means the first epoch sees the transformed sample and stores it back; the next
epoch transforms it again (normalized twice, scaled twice, noise piled up), and so on: the training data drift
away from the test data a bit more every epoch. Nothing raises; the loss may still fall.

gradviz follows the in-place writes of your code on every iteration and reports a line that writes the same part
of a tensor that needs no gradient again on a later iteration, each time through a new view (the cache read
afresh, then modified). In-place updates that are meant are left alone: overwrites (`copy_`, `fill_`,
`buf[i] = v`, `out=`, `normal_`), idempotent ops (`clamp_`, `relu_`), a buffer updated through the tensor that
holds it (optimizer state, EMA weights, running statistics), and an element updated by its index
(`counts[c] += 1`).

The mistake:

    def __getitem__(self, i):
        x = self.features[i]
        x.sub_(self.mean).div_(self.std)
        return x, self.labels[i]

The fix: transform a copy, or out of place (a new tensor; the cache stays as loaded):

        x = self.features[i].clone()
        # or: x = (self.features[i] - self.mean) / self.std
""")

_METHOD_CHAIN = re.compile(r"^(\w+)\.\w+_\(")
_AUGMENTED = re.compile(r"^(\w+)\s*(\+|-|\*|/|//|\*\*|%)=\s*(.+)$")
_INPLACE_CALL = re.compile(r"\.(\w+)_\(")
_BINDING = re.compile(r"^(\w+)\s*=\s*(.+)$")


@rule(DATASET_MUTATED_INPLACE)
def dataset_mutated_inplace(ctx, out):
    index = ctx.index
    for f in (ctx.doc.get("training") or {}).get("dataset_mutated_inplace") or ():
        loc, cached_at, taken_at = f.get("location"), f.get("cached_location"), f.get("view_location")
        if taken_at and loc and taken_at.get("line") == loc.get("line"):
            taken_at = None  # (``x *= 2`` binds ``x`` again: not where the view was taken)
        if f.get("indexed"):
            continue  # an element updated by its index (``counts[c] += 1``), on purpose: a counter, a buffer
        text = code_text(loc) or f"x.{f['op']}(…)"
        cached = f"`{f['cached']}`" if f.get("cached") else "a cached tensor"
        made = f" (bound at {index.where(cached_at)})" if cached_at else ""
        view = f"`{f['view']}`" if f.get("view") else "a view"
        message = (f"`{text}` at {index.where(loc)} writes in place into {view}, a view of shape "
                   f"{tuple(f['view_shape'])} of {cached}{made} of shape {tuple(f['base_shape'])}, which needs no "
                   f"gradient: the same part of it was read again and written again on iteration {f['iteration']} "
                   f"({f['revisits']} time(s) up to iteration {f['last_iteration']}). Each pass transforms the "
                   f"values the pass before stored back: the data drift every epoch. Nothing raises.")
        out.add(DATASET_MUTATED_INPLACE.code, message, _hint(text, code_text(taken_at)), loc,
                related=[r for r in [related("the cached tensor bound here", cached_at),
                                     related("the view taken here", taken_at)] if r],
                details={"op": f["op"], "cached": f.get("cached"), "view": f.get("view"),
                         "iteration": f["iteration"], "revisits": f["revisits"]})


def _hint(text, taken):
    """The fix written for the lines: a copy where the view is taken, or the transform out of place."""
    fixes = []
    binding = _BINDING.match(taken or "")
    if binding:
        fixes.append(f"`{binding.group(1)} = {binding.group(2)}.clone()` (a copy: the cache stays as loaded)")
    chain = _METHOD_CHAIN.match(text)
    augmented = _AUGMENTED.match(text)
    if chain:
        out_of_place = _INPLACE_CALL.sub(r".\1(", text)
        fixes.append(f"`{chain.group(1)} = {out_of_place}` (out of place)")
    elif augmented:
        name, op, value = augmented.groups()
        fixes.append(f"`{name} = {name} {op} {value}` (out of place)")
    if not fixes:
        return "Transform a copy (`.clone()` the view when you take it) or use the out-of-place op (`sub`, not `sub_`)."
    return "Write " + ", or ".join(fixes) + "."
