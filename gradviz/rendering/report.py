"""Rich renderables for the terminal report. Built and returned here; only the CLI prints them."""

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .graph import DocIndex
from .style import human_bytes

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values):
    """Unicode bars scaled to the largest value (empty for no values)."""
    top = max(values, default=0)
    if top <= 0:
        return _BARS[0] * len(values)
    return "".join(_BARS[min(len(_BARS) - 1, int(v / top * (len(_BARS) - 1) + 0.5))] for v in values)


def parameters(doc):
    """[(name, shape, got_gradient)] for every parameter in the trace."""
    index = DocIndex(doc)
    got = set(index.leaf_norm)
    for event in doc.get("events", []):
        if event.get("kind") == "grad_write":
            got.add(event.get("variable"))
    return [(v.get("name") or f"v{v['id']}", v.get("shape"), v["id"] in got)
            for v in doc.get("variables", []) if v.get("is_parameter")]


def summary(doc):
    """Graphs and distinct structures, nodes, backward calls, and each parameter with whether it got a gradient."""
    graphs, structures = doc.get("graphs", []), doc.get("structures", [])
    backwards = doc.get("backwards", [])
    table = Table(title="Summary", show_header=False, title_justify="left", box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    table.add_row("script", doc.get("script") or "(traced from Python)")
    table.add_row("graphs", f"{len(graphs)} ({len(structures)} distinct structure{'s' * (len(structures) != 1)})")
    for structure in structures:
        first, last = structure.get("iterations") or [None, None]
        span = f"iteration {first}" if first == last else f"iterations {first}–{last}"
        table.add_row("", f"structure {structure['id']}: {structure.get('node_count')} nodes, seen "
                          f"{structure.get('count')}× ({span})")
    table.add_row("nodes", str(len(doc.get("nodes", []))))
    table.add_row("backward calls", str(len(backwards)))
    dropped = doc.get("dropped") or {}
    if dropped.get("iterations"):
        table.add_row("dropped", dropped.get("note") or f"{dropped['iterations']} iterations summarised")
    params = parameters(doc)
    if not params:
        table.add_row("parameters", "none")
        return table
    grid = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    grid.add_column("parameter")
    grid.add_column("shape")
    grid.add_column("gradient")
    for name, shape, got in params:
        shape_text = "(" + ", ".join(str(d) for d in shape or []) + ")"
        grid.add_row(Text(name), shape_text, Text("yes", style="green") if got else Text("none", style="bold red"))
    return Group(table, grid)


def diagnostics_table(doc):
    """Severity, code, file:line, message (with the offending source line) and hint, one row per diagnostic."""
    diagnostics = doc.get("diagnostics", [])
    if not diagnostics:
        return Text("No diagnostics: nothing suspicious was found.", style="green")
    table = Table(title="Diagnostics", title_justify="left", show_lines=True, header_style="bold")
    table.add_column("severity", no_wrap=True)
    table.add_column("code", no_wrap=True)
    table.add_column("where", no_wrap=True)
    table.add_column("what")
    for diag in diagnostics:
        loc = diag.get("location") or {}
        where = f"{loc.get('file')}:{loc.get('line')}" if loc else "—"
        what = Text(diag["message"])
        if diag.get("count", 1) > 1:
            what.append(f" (×{diag['count']})", style="dim")
        if loc.get("text"):
            what.append("\n  " + loc["text"], style="cyan")
        if diag.get("hint"):
            what.append("\nhint: " + diag["hint"], style="green")
        table.add_row(Text(diag["severity"], style=SEVERITY_STYLE.get(diag["severity"], "")), Text(diag["code"]),
                      Text(where), what)
    return table


def memory_table(doc, width=40):
    """Retained bytes per iteration, peak and final, with a sparkline when they grow."""
    memory = doc.get("memory") or {}
    series = memory.get("series") or []
    table = Table(title="Memory held by finished graphs", title_justify="left", show_header=False, box=None)
    table.add_column(style="dim")
    table.add_column()
    table.add_row("peak retained", human_bytes(memory.get("peak_retained_bytes", 0)))
    table.add_row("final retained", human_bytes(memory.get("final_retained_bytes", 0)))
    values = [s.get("retained_bytes", 0) for s in series]
    if len(values) > 1:
        shown = values[-width:]
        growing = values[-1] > values[0]
        table.add_row("per iteration", Text(sparkline(shown), style="red" if growing else "green"))
        first = series[-len(shown)]
        table.add_row("", f"iterations {first.get('iteration')}–{series[-1].get('iteration')}: "
                          f"{human_bytes(shown[0])} → {human_bytes(shown[-1])}"
                          + (" (growing)" if growing else ""))
    elif values:
        table.add_row("iteration " + str(series[0].get("iteration")), human_bytes(values[0]))
    return table
