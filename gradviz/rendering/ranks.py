"""The job's processes in the report: per-rank lines for the terminal (a rich table) and a per-rank HTML section.

Reads only the merged document's ``job`` and ``ranks`` (``distributed/merge.py``); a single-process document has
neither and gets nothing. Every document string is escaped: ``terminal_safe`` Texts for the terminal,
``html.escape`` for the page.
"""

import html
import re

from ..document import terminal_safe
from .style import human_bytes

_STATUS_STYLE = {"finished": "green", "exception": "bold red", "killed": "bold red", "exit": "yellow"}


def _where(location):
    if not location:
        return ""
    from .report import where

    return where(location)


def _short_where(location):
    """``file.py:line`` (the file's name only): the table's column stays narrow enough for 80 columns."""
    if not location:
        return ""
    import os

    return f"{os.path.basename(str(location.get('file')))}:{location.get('line')}"


def _who(row):
    return f"rank {row['rank']}" if row.get("rank") is not None else f"pid {row.get('pid')}"


def _key(row):
    """The row's key in ``job.structures`` and ``first_divergence`` (``merge._key``)."""
    return str(row["rank"]) if row.get("rank") is not None else f"pid {row.get('pid')}"


def _processes_named(keys):
    """``ranks 0, 1`` / ``rank 0`` for rank keys, then the others (``pid 4242``) as they are."""
    ranks = [k for k in keys if k.isdigit()]
    named = [f"rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)}"] if ranks else []
    return ", ".join(named + [k for k in keys if not k.isdigit()])


def _short_how(how):
    """``spawn`` for ``multiprocessing.Process.start (spawn)``, ``mp.spawn`` for ``torch.multiprocessing.spawn``."""
    how = how or ""
    if how == "torch.multiprocessing.spawn":
        return "mp.spawn"
    if how.startswith("multiprocessing.Process.start (") and how.endswith(")"):
        return how[len("multiprocessing.Process.start ("):-1]
    return how


def job_table(doc):
    """One row per process: rank, pid, how it started, how it ended and where, iterations, graphs,
    structures, peak retained memory, diagnostics. None for a single-process document."""
    job = doc.get("job")
    if not job or not job.get("processes"):
        return None
    from rich.table import Table
    from rich.text import Text

    table = Table(title=None, box=None, header_style="bold", pad_edge=False, padding=(0, 1, 0, 0))
    rows = job.get("processes", [])
    # every process started the same way (all torchrun ranks): the "Job:" line says how, the column is left out so
    # that a row fits in 80 columns with its whole "stopped at"
    started = len({row.get("how") for row in rows}) > 1
    stops = max((len(_short_where(row.get("stopped_at"))) for row in rows), default=0)
    for name in ("process", "started", "status", "stopped at", "iters", "graphs", "structs", "peak mem", "diags"):
        if name != "started" or started:  # "stopped at" is never cut: the other columns give way first
            table.add_column(name, overflow="fold", min_width=stops if name == "stopped at" else None)
    for row in rows:
        how = [Text(terminal_safe(_short_how(row.get("how"))), no_wrap=True)] if started else []
        table.add_row(Text(_who(row)), *how,
                      Text(terminal_safe(row.get("status") or ""), style=_STATUS_STYLE.get(row.get("status"), "")),
                      Text(terminal_safe(_short_where(row.get("stopped_at"))), no_wrap=True),
                      Text(str(row.get("iterations", 0))),
                      Text(str(row.get("graphs", 0))), Text(str(len(row.get("structures") or []))),
                      Text(human_bytes(row.get("peak_retained_bytes") or 0)), Text(str(row.get("diagnostics", 0))))
    return table


_SOURCE_TAG = re.compile(r"\[[^\]\s]*\.(?:cc|cpp|h|hpp):\d+\]\s*")  # gloo's "[.../pair.cc:553] " before its text


def _knock_on_reason(reason):
    """An error in one short clause for the terminal: gloo's source path and its closing advice left out (the
    document keeps the whole message)."""
    reason = _SOURCE_TAG.sub("", reason or "")
    cut = reason.find(". ", 40)
    return reason if cut < 0 else reason[:cut]


def verdict_lines(doc):
    """The job's verdict (``job.verdict``): the process that failed first, or the rank the others waited for in a
    hang and in which collective, then the knock-on failures indented under it. [] when every process finished."""
    verdict = (doc.get("job") or {}).get("verdict")
    if not verdict:
        return []
    who = _who(verdict) if verdict.get("rank") is not None or verdict.get("pid") else "no single rank"
    at = _where(verdict.get("location"))
    kind = verdict.get("kind")
    if kind == "hang":
        head = f"Job hung: {who} was waited for" + (f", at {at}" if at else "")
        if verdict.get("collective"):
            head += f"; the others waited in `{verdict['collective']}`"
        if verdict.get("rank") is None:
            head = f"Job hung: {verdict.get('reason')}"
    elif kind == "missing":
        head = f"Job failed first on {who}: it {verdict.get('reason')}"
    else:
        head = f"Job failed first on {who}" + (f" at {at}" if at else "") + f": {verdict.get('reason')}"
    lines = [terminal_safe(head)]
    for label, entries in (("waiting", verdict.get("waiting") or ()), ("then", verdict.get("knock_on") or ())):
        for entry in entries:
            where = _where(entry.get("location"))
            inside = f" in `{entry['waiting_in']}`" if entry.get("waiting_in") else ""
            reason = _knock_on_reason(entry.get("reason"))
            lines.append(terminal_safe(f"  {label}: {_who(entry)}{inside}" + (f" at {where}" if where else "")
                                       + (f": {reason}" if reason else "")))
    return lines


def job_lines(doc):
    """Plain sentences under the table: the job, where the ranks' graphs first differ, who stopped where (those the
    verdict above does not already name), and the children that were not traced."""
    job = doc.get("job") or {}
    rows = job.get("processes", [])
    lines = [f"Job: {len(rows)} traced process{'es' if len(rows) != 1 else ''} ({terminal_safe(job.get('how'))})"
             + (f", world size {job['world_size']}" if job.get("world_size") else "")] if rows else []
    divergence = job.get("first_divergence")
    if divergence:
        groups = {}
        for rank, signatures in (divergence.get("by_rank") or {}).items():
            groups.setdefault(tuple(signatures), []).append(rank)
        parts = [f"{_processes_named(r)}: {', '.join(s) or 'no graph'}" for s, r in groups.items()]
        lines.append(terminal_safe(f"The ranks' graphs first differ at iteration {divergence['iteration']} "
                                   f"(structures: {'; '.join(parts)})"))
    elif len(rows) - len(job.get("rpc") or ()) > 1:
        lines.append("Every process built the same graph structures in the iterations kept.")
    if job.get("rpc"):
        lines.append(terminal_safe(f"Ranks {', '.join(str(r) for r in job['rpc'])} use torch.distributed.rpc: each "
                                   "plays its own part, so their graphs are not compared with each other."))
    told = _in_verdict(job.get("verdict"))
    for stop in job.get("stopped", []):
        if (stop.get("rank"), stop.get("pid")) in told:  # the verdict above says where it stopped, and why
            continue
        at = _where(stop.get("location"))
        lines.append(terminal_safe(f"{_who(stop)} stopped{' at ' + at if at else ''}: "
                                   f"{_knock_on_reason(stop.get('reason')) or stop.get('status')}"))
    for entry in doc.get("unseen") or []:
        if entry.get("kind") == "child-process":
            at = _where(entry.get("location"))
            lines.append(terminal_safe(f"Not traced: {entry.get('count', 1)} × {entry.get('what')} "
                                       f"[{entry.get('how')}]{' at ' + at if at else ''}"))
    return lines


def _in_verdict(verdict):
    """(rank, pid) of every process the verdict names: its head, the waiting ranks and the knock-on failures."""
    if not verdict:
        return set()
    entries = [verdict, *(verdict.get("waiting") or ()), *(verdict.get("knock_on") or ())]
    return {(e.get("rank"), e.get("pid")) for e in entries if e.get("rank") is not None or e.get("pid")}


def ranks_section(doc):
    """The page's per-rank section: the table, the job sentences, which ranks built which structure, and each
    rank's first graph side by side. Empty for a single-process document."""
    job = doc.get("job")
    if not job:
        return ""
    if not job.get("processes"):
        return "".join(f"<p>{html.escape(line)}</p>" for line in job_lines(doc))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ("process", "pid", "started by", "status", "stopped at",
                                                        "iterations", "graphs", "structures", "peak memory",
                                                        "diagnostics"))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            _who(row), row.get("pid"), row.get("how") or "", row.get("status") or "", _where(row.get("stopped_at")),
            row.get("iterations", 0), row.get("graphs", 0), len(row.get("structures") or []),
            human_bytes(row.get("peak_retained_bytes") or 0), row.get("diagnostics", 0))) + "</tr>"
        for row in job.get("processes", []))
    sentences = "".join(f"<p>{html.escape(line)}</p>" for line in job_lines(doc))
    verdict = "".join(f'<p class="verdict">{html.escape(line.strip())}</p>' for line in verdict_lines(doc))
    return (f'<h2>Processes</h2><div id="ranks">{verdict}<table class="ranks"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>{sentences}{_structure_matrix(job)}{_side_by_side(doc)}</div>")


def _structure_matrix(job):
    rows = job.get("processes", [])
    if not job.get("structures") or len(rows) < 2:
        return ""
    keys = [_key(row) for row in rows]
    head = "<th>structure</th><th>nodes</th>" + "".join(f"<th>{html.escape(_who(r))}</th>" for r in rows)
    body = ""
    for s in job["structures"]:
        cells = "".join(f"<td>{html.escape(str(s['counts'].get(k, '—')))}</td>" for k in keys)
        body += (f"<tr><td><code>{html.escape(str(s.get('signature')))}</code></td>"
                 f"<td>{html.escape(str(s.get('node_count')))}</td>{cells}</tr>")
    return (f'<h3>Which process built which structure (graphs of each)</h3><table class="ranks">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _first_picture(rank_doc, budget):
    """(title, svg or None) of a process's first graph picture."""
    from .layout import dot_available, lay_out
    from .pictures import pictures_to_draw

    drawn = pictures_to_draw(rank_doc)
    if not drawn:
        return "no graph", None
    picture = drawn[0]
    if not dot_available():
        return picture.title, None
    _, _, data = lay_out(rank_doc, "svg", budget, graphs=[picture.graph])
    return picture.title, data.decode("utf-8")


def _side_by_side(doc, budget=1.5):
    """Each process's first graph picture, in one row (the SVG of the main document is drawn above)."""
    from .svg import inline_svg

    cells = []
    for position, rank_doc in enumerate(doc.get("ranks") or []):
        row = doc["job"]["processes"][position]
        try:
            title, svg = _first_picture(rank_doc, budget)
        except Exception as exc:  # one rank's picture must not cost the page
            title, svg = f"not drawn: {exc}", None
        shown = inline_svg(svg) if svg and svg.lstrip().startswith("<") else f"<p>{html.escape(title)}</p>"
        cells.append(f'<div class="picture"><h3>{html.escape(_who(row))}: {html.escape(title)}</h3>{shown}</div>')
    if not cells:
        return ""
    return ('<h3>First graph of each process</h3><div class="ranks-row" style="display:flex;gap:1em;'
            f'overflow-x:auto">{"".join(cells)}</div>')
