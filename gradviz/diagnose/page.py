"""docs/diagnostics.md, generated from the catalogue: ``python -m gradviz.diagnose.page docs/diagnostics.md``
(a test fails when the page is stale). The page's prose lives here, so nothing exists only in the .md; the codes,
titles and explanations come from the registry (each rule module's ``Code`` entries, in catalogue order), the causes
from ``why``, the severities from the document's vocabulary.
"""

from ..document.vocabulary import SEVERITIES
from . import registry
from .why import CAUSES

TITLE = "Diagnostics catalogue"
INTRODUCTION = """\
`gradviz run` (and `tr.diagnostics`, `gradviz.diagnose.diagnose(doc)`) reports each finding as a record with a
stable kebab-case `code`, a `severity` ({severities}), a one-line `message` naming the Variables and
ops involved, the `location` in your code, `related` locations (where a value was saved, where the first backward
ran…), the ids of the graph `nodes` and `variables` involved (the pictures colour them), `links` to related
diagnostics, a `count` (a finding repeated on the same line in a loop is reported once) and a `hint` that ends
with the command to learn more: `gradviz explain CODE` prints the sections below.

Diagnostics are pure functions of the trace document (docs/trace-format.md), so a saved `report.json` gives the
same answers as the live run. A correct training loop (zero_grad, forward, loss, backward, step) reports nothing:
`samples/clean_mlp.py` and `samples/clean_cnn.py` are tested to stay silent over 100 iterations.

The `ddp-*` codes are a job's, not one document's: `gradviz.diagnose.ddp_rules.diagnose_job(rank_docs)` compares
the documents of every rank of a DistributedDataParallel job (their `ddp` sections, docs/trace-format.md) and
names the ranks involved in `details.ranks`; `samples/ddp_*.py` reproduce each on 2 CPU ranks.
"""
WHY_NONE = """\
`tr.why_none(variable)` / `gradviz.diagnose.why_none(doc, variable_id)` classifies a missing gradient and names
the edge or line where the path from the root breaks. `none-grad`, `graph-cut` and `no-requires-grad` carry the
same answer in their `details.why_none`. It returns `{"variable", "cause", "message", "location", "break"}`
with `break = {"kind", "location", "node", "variable", "edge", "how"}` (None for `has-grad`). Causes:"""
SEEDS = """\
Every sample in `samples/` runs one situation from the seed documents; `samples/README.md` lists the diagnostics
each must report (checked by `tests/test_samples_diagnostics.py`): the `Variable` trick → `graph-cut` (info);
`y1.backward(y1.grad)` → `none-grad` + `nonscalar-backward`, linked; the hook answer with `retain_graph=True` in a
loop → `retained-graph` (warning, growing); `nn.Sequential` → nothing; the autograd notes' `volatile` example →
`volatile-deprecated`; in-place ops on saved values and views → `stale-version`.
"""


def _markdown_text(text):
    """An explanation as Markdown: each block indented by four spaces after a blank line becomes a fenced Python
    block (an indented line that continues a list item stays text), and "In the picture:" is bold."""
    lines = text.rstrip("\n").split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("    ") and (i == 0 or lines[i - 1] == ""):
            out.append("```python")
            while i < len(lines) and (lines[i].startswith("    ") or
                                      (lines[i] == "" and i + 1 < len(lines) and lines[i + 1].startswith("    "))):
                out.append(lines[i][4:])
                i += 1
            out.append("```")
            continue
        line = lines[i]
        if line.startswith("In the picture:"):
            line = "**In the picture:**" + line[len("In the picture:"):]
        out.append(line)
        i += 1
    return "\n".join(out)


def markdown():
    """docs/diagnostics.md: the introduction, why_none's causes, the table of codes, one section per code."""
    codes = registry.catalogue()
    parts = [f"# {TITLE}", INTRODUCTION.format(severities=", ".join(f"`{s}`" for s in SEVERITIES)).rstrip("\n"),
             "## Why is this gradient None? (`why_none`)", WHY_NONE,
             "| cause | meaning |\n|---|---|\n" + "\n".join(f"| `{c}` | {m} |" for c, m in CAUSES.items()),
             "## Codes",
             "| code | severity | title |\n|---|---|---|\n" +
             "\n".join(f"| [`{c.code}`](#{c.code}) | {c.severity} | {c.title} |" for c in codes)]
    for c in codes:
        parts += [f"## {c.code}", f"**{c.severity}** — {c.title}.", _markdown_text(c.explanation)]
    parts += ["## Where each seed situation is reproduced", SEEDS.rstrip("\n")]
    return "\n\n".join(parts) + "\n"


def update_docs(path):
    """Rewrite ``path`` from the catalogue; True when it changed."""
    new = markdown()
    try:
        with open(path, encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = None
    if new == old:
        return False
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
    return True


if __name__ == "__main__":  # pragma: no cover - maintenance command for the docs
    import sys

    for doc in sys.argv[1:]:
        print(f"{doc}: {'updated' if update_docs(doc) else 'up to date'}")
