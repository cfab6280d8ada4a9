"""DistributedDataParallel diagnostics over a job: every rank's trace document, compared.

``diagnose_job(rank_docs)`` is a pure function of the documents (their ``ddp`` sections, written by the torch
adapter's DDP watcher, and their graphs and structures): it runs every job-level rule (``scope="job"``, the
``rules/ddp_*.py`` modules) once over the ranks' documents. Each finding names the ranks involved
(``details["ranks"]``) and, where it is about parameters, which (``details["parameters"]``):

- ``ddp-unused-parameters``: wrapped parameters some rank's backward gave no gradient, at the line of the call
  the branch skipped (or PyTorch's own "Expected to have finished reduction" error turned into that);
- ``ddp-divergent-graph``: ranks built different graphs in one iteration;
- ``ddp-accumulate-without-no-sync``: micro-steps before one optimizer step each all-reduced;
- ``ddp-grad-mismatch``: a parameter's gradient differs across ranks at an optimizer step.

The first and the third need no second rank: their rules also run on one document whose process is the whole
job (a DDP model in a one-rank group). This module also holds what the DDP rules share: a rank's view of its
document and the wording of ranks, names and lines.
"""

from . import registry
from .records import Collector


def diagnose_job(rank_docs):
    """The DDP diagnostics of a job, given each rank's document (a ``process.rank`` field, or else the list order,
    gives each document's rank)."""
    ranks = sorted((Rank(doc, i) for i, doc in enumerate(rank_docs)), key=lambda r: r.rank)
    ctx = registry.RuleContext(None, None, docs=tuple(r.doc for r in ranks), ranks=tuple(r.rank for r in ranks))
    out = Collector()
    for r in registry.rules("job"):
        r.function(ctx, out)
    return out.finish()


def job_ranks(ctx):
    """A job rule's ranks (``Rank``), in rank order; [] when no rank used DDP."""
    ranks = [Rank(doc, rank) for doc, rank in zip(ctx.docs, ctx.ranks)]
    return ranks if any(r.ddp for r in ranks) else []


def alone(doc):
    """``[Rank]`` for a document whose process is a whole DDP job by itself (a DDP model in a one-rank group:
    ``gradviz run`` of a script that wraps its model in DDP with world size 1, or a job of one rank), else [].
    A rank of a larger job is left to ``diagnose_job``, which the merge of the job's documents runs."""
    ddp = doc.get("ddp")
    if not ddp or not ddp.get("modules"):
        return []
    world_size = (ddp.get("process") or {}).get("world_size")
    if world_size not in (None, 1):
        return []
    return [Rank(doc, 0)]


class Rank:
    """One rank's document, its rank, its ``ddp`` section and its DDP modules by path."""

    def __init__(self, doc, position):
        self.doc = doc
        self.ddp = doc.get("ddp") or {}
        process = doc.get("process") or self.ddp.get("process") or {}
        rank = process.get("rank")
        self.rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else position
        self.modules = {m["path"]: m for m in self.ddp.get("modules", ())}


def ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def names_text(names, most=6):
    names = list(names)
    text = ", ".join(f"`{n}`" for n in names[:most])
    return text + (f" and {len(names) - most} more" if len(names) > most else "")


def line_text(location):
    if not location:
        return "an unknown line"
    return f"{location.get('file')}:{location.get('line')}"


def line_key(location):
    return None if not location else (location.get("file"), location.get("line"))
