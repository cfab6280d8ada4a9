"""The verdict: the one line a report starts with, saying what the run's trace concluded before any detail.

``gradviz: 2 mistakes found (1 error, 1 warning)``, ``gradviz: no mistakes seen in 7 graphs``, ``gradviz saw no
graph: …``. A silence is an all-clear only when the trace saw work and nothing beyond its sight
(``document.coverage``): otherwise the line says what qualifies it. Plain text (no rich): the terminal report,
the notebook cell and anything else that sums a run up share it. Values from the document are escaped by the
caller that prints them.
"""

import os

from ..document.coverage import NO_AUTOGRAD, saw_autograd
from ..document.vocabulary import SEVERITIES


def plural(n, word):
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def severity_counts(diagnostics):
    """``2 errors, 1 warning``: how many of each severity, the gravest first (unknown severities last)."""
    counts = {}
    for diag in diagnostics:
        counts[diag.get("severity")] = counts.get(diag.get("severity"), 0) + 1
    order = [s for s in SEVERITIES if s in counts] + [s for s in counts if s not in SEVERITIES]
    return ", ".join(plural(counts[s], str(s)) for s in order)


def graphs_built(doc):
    """How many graphs the run built: every iteration of every structure, those a long run did not list too."""
    built = sum(s.get("count", 1) for s in doc.get("structures") or ()) or len(doc.get("graphs") or ())
    return built + ((doc.get("dropped") or {}).get("structure_count") or 0)


def display_path(path, cwd=None):
    """``path`` relative to the current folder when it lies under it; otherwise as given."""
    if not path:
        return path
    cwd = cwd or os.getcwd()
    absolute = os.path.abspath(path)
    if absolute == cwd or absolute.startswith(cwd.rstrip(os.sep) + os.sep):
        return os.path.relpath(absolute, cwd)
    return path


def where(location):
    """``file:line`` of a location record, the file shown relative to the current folder."""
    if not location:
        return "—"
    return f"{display_path(location.get('file'))}:{location.get('line')}"


def stopped_at(doc, where=where):
    """Where the run stopped at a name gradviz's engine lacks, as ``where`` writes a location (``""`` when the
    place is unknown); None when it did not stop there. ``verdict_text``'s second argument."""
    status = doc.get("status") or {}
    if not status.get("unsupported"):
        return None
    location = (status.get("exception") or {}).get("location")
    return where(location) if location else ""


def verdict_text(doc, stopped_at=None):
    """The first line of the report. ``stopped_at`` is where the run stopped at a name gradviz's engine lacks
    (``file:line``, or ``""`` when the place is unknown), None when it did not. Errors and warnings are mistakes;
    an info diagnostic is a note, counted apart."""
    diagnostics = doc.get("diagnostics") or []
    mistakes = [d for d in diagnostics if d.get("severity") != "info"]
    notes = len(diagnostics) - len(mistakes)
    noted = f", and {plural(notes, 'note')} (info)" if notes else ""
    stopped = None if stopped_at is None else "the run stopped" + (f" at {stopped_at}" if stopped_at else "")
    beyond = [e for e in doc.get("unseen") or () if e.get("kind") != NO_AUTOGRAD]
    if mistakes:
        found = f"gradviz: {plural(len(mistakes), 'mistake')} found ({severity_counts(mistakes)}){noted}"
        if stopped:
            return f"{found} before {stopped}; nothing after it was checked"
        return found + (f"; {_beyond(beyond)}" if beyond else "")
    if stopped:  # the reason on this line too, unless diagnostics follow (their note says it after them)
        name = (doc.get("status") or {}).get("unsupported")
        reason = "" if notes else f": `{name}` is not supported by gradviz's engine"
        return f"gradviz: no mistakes seen before {stopped}{reason}{noted}; nothing after it was checked"
    if not saw_autograd(doc) and not any(saw_autograd(r) for r in doc.get("ranks") or ()):  # (a job's processes)
        blind = next((e for e in doc.get("unseen") or () if e.get("kind") == NO_AUTOGRAD), None)
        return "gradviz saw no graph: " + ((blind or {}).get("how") or "no autograd work reached the trace")
    seen = _seen(doc)
    if beyond:
        return f"gradviz: no mistakes seen in what it saw ({seen}){noted}; {_beyond(beyond)}"
    return f"gradviz: no mistakes seen in {seen}{noted}"


def _seen(doc):
    """``7 graphs``, or with light mode ``100 iterations (7 recorded in full, 7 graphs; 93 watched light)``: what
    the silence covers."""
    built = graphs_built(doc)
    if not built:  # backward calls seen on graphs the trace did not record (built before it started)
        calls = len(doc.get("backwards") or ()) + ((doc.get("dropped") or {}).get("backwards") or 0)
        return plural(calls, "backward call")
    graphs = plural(built, "graph")
    schedule = doc.get("schedule") or {}
    light = (schedule.get("light_iterations") or 0) if schedule.get("mode") == "light" else 0
    if not light:
        return graphs
    full = sum(r["last"] - r["first"] + 1 for r in schedule.get("full") or ())
    total = max(doc.get("iterations") or 0, light + full)
    return f"{plural(total, 'iteration')} ({total - light:,} recorded in full, {graphs}; {light:,} watched light)"


def _beyond(entries):
    return f"work beyond its sight is listed below ({len(entries)} {'entry' if len(entries) == 1 else 'entries'})"
