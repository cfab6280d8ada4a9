"""dataset-mutated-inplace: a view of a cached tensor transformed in place, so every epoch transforms the data
again. Named at the in-place line, with the cached tensor's and the view's lines, by ``gradviz run`` in its
default (light) mode on real PyTorch; silent on the fixed twin and on the in-place updates that are meant."""

import pytest

from tests.silent_bugs import SAMPLES, found, light_schedule, line_of, run

pytest.importorskip("torch")

LOOP = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
data, labels = torch.randn(40, 6), torch.randint(0, 3, (40,))
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
{setup}
for step in range(60):
    i = step % 10
    x = data[4 * i:4 * i + 4]
    {body}
    optimizer.zero_grad()
    F.cross_entropy(model(x), labels[4 * i:4 * i + 4]).backward()
    optimizer.step()
'''


def _script(tmp_path, body, setup="pass"):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(setup=setup, body=body))
    return script


def test_the_sample_is_named_at_the_inplace_line_with_the_cache_and_the_view(tmp_path):
    sample = SAMPLES / "dataset_mutated_inplace.py"
    doc = run(sample, tmp_path)
    full = light_schedule(doc)
    [d] = doc["diagnostics"]
    assert (d["code"], d["severity"]) == ("dataset-mutated-inplace", "warning")
    assert d["location"]["line"] == line_of(sample, "x.sub_(self.mean).div_(self.std)")
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "the cached tensor bound here": line_of(sample, "raw = torch.randn(600, 8)"),
        "the view taken here": line_of(sample, "x = self.features[i]")}
    # 480 items, 10 batches an epoch: the first item read again is in the second epoch, on a light iteration
    assert d["details"] == {"op": "sub_", "cached": "raw", "view": "x", "iteration": 10, "revisits": 2400}
    assert not any(r["first"] <= 10 <= r["last"] for r in full)
    assert d["message"].startswith(f"`x.sub_(self.mean).div_(self.std)` at line {d['location']['line']} writes in "
                                   "place into `x`, a view of shape (8,) of `raw` (bound at line ")
    assert "the data drift every epoch" in d["message"]
    assert d["hint"].startswith("Write `x = self.features[i].clone()` (a copy: the cache stays as loaded), or "
                                "`x = x.sub(self.mean).div(self.std)` (out of place).")


def test_the_fixed_twin_is_silent(tmp_path):
    assert run(SAMPLES / "dataset_mutated_inplace_fixed.py", tmp_path)["diagnostics"] == []


@pytest.mark.parametrize("mode", ["--light", "--full"])
def test_an_augmented_write_into_a_slice_in_the_loop_is_named(mode, tmp_path):
    script = _script(tmp_path, "x *= 1.01  # MARK")
    doc = run(script, tmp_path / "out", "torch", mode)
    [d] = found(doc, "dataset-mutated-inplace")
    assert d["location"]["line"] == line_of(script, "# MARK")
    assert d["details"]["iteration"] == 10 and d["details"]["cached"] == "data"
    assert d["hint"].startswith("Write `x = x * 1.01` (out of place).")  # (`x *=` binds x again: no view line)
    assert {r["role"]: r["location"]["line"] for r in d["related"]} == {
        "the cached tensor bound here": line_of(script, "data, labels = torch.randn(40, 6)")}


MEANT = """\
ema = [p.detach().clone() for p in model.parameters()]
flat = torch.zeros(100)
velocity = [flat[:50], flat[50:]]
replay = torch.zeros(10, 4, 6)
noise = torch.empty(10, 4, 6)
counts = torch.zeros(3)
scaled = torch.randn(10, 6)
"""

MEANT_BODY = """\
replay[i] = x  # a replay buffer written by index
    torch.randn(4, 6, out=noise[i])  # a preallocated buffer refilled
    for c in labels[4 * i:4 * i + 4].tolist():
        counts[c] += 1  # a counter updated by its index
    scaled[i].clamp_(-1, 1)  # idempotent
    scaled[i].copy_(x[0])  # an overwrite
    for v in velocity:
        v.mul_(0.9).add_(0.1)  # a state buffer, through the views that hold it
    with torch.no_grad():
        for e, p in zip(ema, model.parameters()):
            e.mul_(0.99).add_(p, alpha=0.01)  # EMA weights"""


def test_in_place_updates_that_are_meant_are_silent(tmp_path):
    doc = run(_script(tmp_path, MEANT_BODY, MEANT), tmp_path / "out")
    assert doc["diagnostics"] == [], [d["message"] for d in doc["diagnostics"]]
    # the counter is a fact of the trace (a view written again), left out by the rule: an element updated by its
    # index; nothing else is noted
    noted = (doc.get("training") or {}).get("dataset_mutated_inplace") or []
    assert [(f["location"]["text"].split("#")[0].strip(), f["indexed"]) for f in noted] == [("counts[c] += 1", True)]


@pytest.mark.parametrize("mode", ["--light", "--full"])
def test_an_update_by_index_is_told_by_the_trace_not_by_the_line_text(mode, tmp_path):
    """``stats.get("counts")[c] += 1`` stores the updated element back (``__setitem__``): a counter, whatever the
    line looks like (the rule once matched the line's text, and took this one for the mistake)."""
    setup = 'stats = {"counts": torch.zeros(3)}'
    body = 'for c in labels[4 * i:4 * i + 4].tolist():\n        stats.get("counts")[c] += 1  # MARK'
    doc = run(_script(tmp_path, body, setup), tmp_path / "out", "torch", mode)
    assert doc["diagnostics"] == [], [d["message"] for d in doc["diagnostics"]]
    [noted] = doc["training"]["dataset_mutated_inplace"]
    assert (noted["location"]["line"], noted["indexed"]) == (line_of(tmp_path / "loop.py", "# MARK"), True)


def test_only_a_fresh_view_of_the_same_part_on_a_later_iteration_counts():
    """CacheWrites alone: the same view object written again (a state buffer), or the same part written twice in
    one iteration (a chain of in-place ops) is not a revisit; a new view of that part on a later iteration is."""
    import torch

    from gradviz.tracing.cache_writes import CacheWrites

    cache, base = CacheWrites(), torch.zeros(4, 3)
    described = []

    def describe():
        described.append(1)
        return tuple(base.shape), ("data", "made"), ("x", "taken")

    def write(view, iteration, location="L"):
        region = (view.storage_offset(), tuple(view.shape), view.stride())
        cache.write(location, "mul_", view, base, region, iteration, describe)

    held = base[1]
    write(held, 0)
    write(held, 1)  # the same object: a buffer updated through the tensor that holds it
    write(base[2], 1)
    write(base[2], 1)  # a new view, but the same iteration
    assert cache.found == {} and described == []
    write(base[2], 2)  # read again and modified again
    write(base[2], 3, location="M")  # another line: its own region record
    write(base[2], 4)
    [entry] = cache.found.values()
    assert (entry["location"], entry["iteration"], entry["last_iteration"], entry["revisits"]) == ("L", 2, 4, 2)
    assert (entry["view_shape"], entry["base_shape"], entry["cached"], entry["view"]) == ([3], [4, 3], "data", "x")
    assert described == [1]  # the names are looked up once, at the finding
    assert cache.section(lambda where: where)[0]["indexed"] is False


def test_a_view_stored_back_into_what_it_was_taken_from_is_an_indexed_update():
    """``counts[c] += 1``: the view written, then ``counts.__setitem__(c, view)``; only the view written last,
    stored into the tensor (or a view of the tensor) it was taken from, counts. Through the torch adapter's
    ``cache_write``, which tells a view of the target's memory from a copy."""
    import types

    import torch

    from gradviz.tracing.adapters.torch.cache_watch import cache_write
    from gradviz.tracing.cache_writes import CacheWrites

    cache, counts, other = CacheWrites(), torch.zeros(4), torch.zeros(4)
    builder = types.SimpleNamespace(training=types.SimpleNamespace(cache_writes=cache))

    def bump(iteration, location, store_into=None):
        view = counts[1]
        cache.write(location, "__iadd__", view, counts, (1, (), ()), iteration, lambda: ((4,), None, None))
        if store_into is not None:
            cache_write(builder, store_into, "__setitem__", location, view)

    for it in range(3):
        bump(it, "counter", store_into=counts)
        bump(it, "elsewhere", store_into=other)  # stored into another tensor: a copy, not an update by index
        bump(it, "view", store_into=counts[:2])  # into a view of the same tensor: still by index
        bump(it, "plain")
    cache_write(builder, counts, "__setitem__", "plain", counts[1])  # a view never written: nothing
    assert {f["location"]: f["indexed"] for f in cache.section(lambda where: where)} == {
        "counter": True, "elsewhere": False, "view": True, "plain": False}
