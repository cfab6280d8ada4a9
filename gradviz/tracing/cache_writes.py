"""In-place writes that re-read a cached tensor (``dataset-mutated-inplace``), the same for every engine.

A Dataset whose ``__getitem__`` transforms ``self.data[i]`` in place writes the transformed values back into the
cache: the next epoch reads them and transforms them again. What tells it from the in-place updates that are
meant (optimizer state, EMA weights, running statistics, a replay buffer, an ``out=`` buffer) is *how* the memory
is reached and written:

- the write reads the old value (``sub_``, ``mul_``, ``+=``…), and is not idempotent: an overwrite (``copy_``,
  ``fill_``, ``buf[i] = v``, ``out=``, ``normal_``) or a clamp applied twice changes nothing further;
- it goes through a *view* of a larger tensor that needs no gradient (a row of the cache), not the whole tensor;
- the same part of that tensor is written again by the same line through a *new* view, on a later iteration: the
  cache was read afresh and modified again. A state buffer is updated through the tensor (or view) that holds it,
  the same object every time.

The adapter hands each such write in (``write``) with neutral keys: the base tensor's identity, the written
region and the view, both held weakly (a base that died and whose id was reused starts over). An element updated
by its index (``counts[c] += 1``: Python reads ``counts[c]``, a new view, updates it, then stores it back with
``counts[c] = view``) is told by that store (``stored_back``): the finding says so (``indexed``), and the rule
leaves such an update alone (a counter, a buffer).
"""

import weakref

READS_OLD = frozenset((  # in-place ops whose result depends on the old value and changes it again when repeated
    "add_", "sub_", "mul_", "div_", "true_divide_", "floor_divide_", "pow_", "addcmul_", "addcdiv_", "lerp_",
    "exp_", "log_", "log1p_", "log2_", "log10_", "sqrt_", "rsqrt_", "neg_", "reciprocal_", "sigmoid_", "tanh_",
    "sin_", "cos_", "square_", "fmod_", "remainder_", "addmm_", "addmv_", "baddbmm_", "subtract_", "multiply_",
    "divide_", "xlogy_", "expm1_", "erf_", "atan_", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__",
    "__ifloordiv__", "__ipow__", "__imod__"))
REGION_LIMIT = 1 << 14  # parts of cached tensors followed (a data set of more items is followed on its first ones)
FOUND_LIMIT = 16


class CacheWrites:
    """The regions of cached tensors written in place through fresh views, and the lines that write them again."""

    def __init__(self):
        self.regions = {}  # (location, id(base), region) -> [weak view, weak base, iteration]
        self.found = {}  # (location, id(base)) -> the finding's entry
        self.indexed = set()  # (location, id(base)) whose views were stored back by ``__setitem__``
        self._last = None  # (location, id(base)), weak view: the last write, for ``stored_back``

    def write(self, location, op, view, base, region, iteration, describe):
        """``view`` (a view of ``base``, neither requiring grad) was written by ``op`` at ``location``; ``region``:
        which part of ``base`` (offset, shape, strides). ``describe()``: ``(base shape, (name, location) of the
        line that bound ``base``, the same for ``view``)`` (None where no frame binds it), asked once per finding."""
        key = (location, id(base), region)
        self._last = (key[:2], weakref.ref(view))
        regions = self.regions
        seen = regions.get(key)
        if seen is None or seen[1]() is not base:
            if len(regions) < REGION_LIMIT or seen is not None:
                regions[key] = [weakref.ref(view), weakref.ref(base), iteration]
            return
        if seen[0]() is view or seen[2] == iteration:
            return  # the same view written again (a state buffer), or a chain on one line (``sub_(m).div_(s)``)
        seen[0], seen[2] = weakref.ref(view), iteration
        found = self.found.get(key[:2])
        if found is not None:
            found["revisits"] += 1
            found["last_iteration"] = iteration
            return
        if len(self.found) >= FOUND_LIMIT:
            return
        shape, cached, taken = describe()
        self.found[key[:2]] = {"location": location, "op": op, "iteration": iteration, "last_iteration": iteration,
                               "revisits": 1, "view_shape": list(region[1]), "base_shape": list(shape),
                               "cached": None if cached is None else cached[0],
                               "cached_location": None if cached is None else cached[1],
                               "view": None if taken is None else taken[0],
                               "view_location": None if taken is None else taken[1]}

    def stored_back(self, value):
        """``target[index] = value`` ran with ``value`` a view of ``target``'s memory (the adapter tells): when it
        is the view written last, that write was an augmented assignment through an index (``target[index] += v``)."""
        last = self._last
        if last is None or last[1]() is not value:
            return
        self._last = None
        if len(self.indexed) < REGION_LIMIT:
            self.indexed.add(last[0])

    def section(self, loc):
        indexed = self.indexed
        return [dict(f, location=loc(f["location"]), cached_location=loc(f["cached_location"]),
                     view_location=loc(f["view_location"]), indexed=key in indexed)
                for key, f in self.found.items()]
