"""ddp-accumulate-without-no-sync: micro-steps of gradient accumulation that each all-reduced, where one
all-reduce per optimizer step would do."""

from ..ddp_rules import alone, job_ranks, line_key, ranks_text
from ..records import related
from ..registry import Code, rule

DDP_ACCUMULATE_WITHOUT_NO_SYNC = Code("ddp-accumulate-without-no-sync", "warning",
                                      "gradient accumulation all-reduced on every DDP micro-step",
                                      """\
Several backward passes (micro-steps) of a DDP model ran before one optimizer step, and each of them
all-reduced the gradients.

With gradient accumulation only the sum at the optimizer step matters. DDP cannot know that: every backward
run outside `no_sync()` all-reduces all gradients, so accumulating N micro-steps costs N all-reduces where one
would do (the result is the same; the time and the network traffic are N times larger). gradviz counts, for
each optimizer step, the DDP backward passes since the previous step and how many of them synchronised.

The mistake:

    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / 4
        loss.backward()                   # all-reduces every time
        if i % 4 == 3:
            opt.step()
            opt.zero_grad()

The fix: run the first N-1 micro-steps (forward and backward) under `model.no_sync()` and let the last one
all-reduce the summed gradients:

    for i, (x, y) in enumerate(loader):
        sync = i % 4 == 3
        with contextlib.nullcontext() if sync else model.no_sync():
            loss = loss_fn(model(x), y) / 4
            loss.backward()
        if sync:
            opt.step()
            opt.zero_grad()
""")


@rule(DDP_ACCUMULATE_WITHOUT_NO_SYNC, order=74)
def ddp_accumulate_without_no_sync_alone(ctx, out):
    """A DDP model in a one-rank group (no second rank needed)."""
    accumulate_without_no_sync(alone(ctx.doc), out)


@rule(DDP_ACCUMULATE_WITHOUT_NO_SYNC, order=74, scope="job")
def ddp_accumulate_without_no_sync(ctx, out):
    accumulate_without_no_sync(job_ranks(ctx), out)


def accumulate_without_no_sync(ranks, out):
    """Optimizer steps whose micro-steps all-reduced more than once (no ``no_sync()`` around the earlier ones)."""
    found = {}  # (module, line) -> [rank, first entry, steps]
    for r in ranks:
        acc = r.ddp.get("accumulation") or {}
        first = acc.get("first")
        if not first:
            continue
        key = (first["module"], line_key(first.get("location")))
        entry = found.setdefault(key, {"ranks": [], "first": first, "extra": 0})
        entry["ranks"].append(r.rank)
        entry["extra"] = max(entry["extra"], acc.get("extra_syncs", 0))
    for (module, _), entry in found.items():
        first = entry["first"]
        n, synced = first["backwards"], first["synced"]
        message = (f"{n} backward passes of DDP module `{module}` before one optimizer step each all-reduced "
                   f"({synced} all-reduces where 1 is needed) on {ranks_text(entry['ranks'])}, from step "
                   f"{first['step']}")
        hint = (f"Wrap the first {n - 1} micro-steps (forward and backward) in `with {module}.no_sync():` and let "
                "the last one all-reduce: the gradients summed locally are the same, with one all-reduce per step.")
        out.add("ddp-accumulate-without-no-sync", message, hint, first.get("location"),
                related=[related("optimizer step", first.get("step_location"))],
                details={"ranks": sorted(entry["ranks"]), "module": module, "micro_steps": n,
                         "synchronised": synced, "extra_all_reduces": entry["extra"], "step": first["step"]})
