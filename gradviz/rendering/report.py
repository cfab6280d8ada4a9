"""Rich renderables for the terminal report. Built and returned here; only the CLI prints them.

``terminal_report`` is the whole report, in the order a reader needs it: the verdict on the first line
(``verdict.py``), what qualifies it (what ran beyond the trace's sight), the diagnostics, then the summary. A
clean run is a dozen lines; the details are in report.html.

The report must read well from 80 columns up: section titles are plain lines (a table title would wrap to the
table's width), and a diagnostic is a block — one aligned line with severity, code and ``file:line``, then its
message, source line and hint indented below at full width — rather than a four-column table whose message
column shrinks to a word per line.

Every string that comes from the document (names, paths, messages, source lines, hints) enters a renderable
through ``_data``: as a ``Text`` (never parsed as rich markup) with its control characters escaped
(``terminal_safe``), so a hostile name or path prints as inert text.
"""

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..document import DocIndex, terminal_safe
from ..document.coverage import NO_AUTOGRAD, all_clear
from .style import backward_calls, backward_checks_text, human_bytes
from .verdict import display_path, graphs_built, plural, severity_counts, stopped_at, verdict_text, where

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
_BARS = "▁▂▃▄▅▆▇█"
# The report fits a screen whatever the run (about 50 lines at most): each list is cut, with "+N more, see
# report.html" (report.json has everything)
_MAX_PARAMETERS = 10
_MAX_STRUCTURES = 3
_MAX_DIAGNOSTICS = 3
_GRADIENT_STYLE = {"yes": "green", "none": "bold red", "frozen": "dim"}


def sparkline(values):
    """Unicode bars scaled to the largest value (empty for no values)."""
    top = max(values, default=0)
    if top <= 0:
        return _BARS[0] * len(values)
    return "".join(_BARS[min(len(_BARS) - 1, int(v / top * (len(_BARS) - 1) + 0.5))] for v in values)


def _data(value, style=""):
    """A document string as an inert ``Text``: control characters escaped, no markup."""
    return Text(terminal_safe("" if value is None else value), style=style)


def _heading(text):
    return Text(text, style="bold")


def parameters(doc):
    """[(name, shape, gradient)] for each parameter of the traced model, ``gradient`` being ``"yes"``, ``"none"``
    or ``"frozen"`` (it did not require grad at the end). A parameter requiring grad that no recorded op used and
    no optimizer was given, with no gradient, is not part of the model trained here: ``idle_parameters`` lists
    those still alive at the end (a module built and never called, a model loaded and not yet run); those gone
    by then (the template layer ``nn.TransformerEncoder`` deep-copies, a layer replaced) are not counted at all."""
    index, got, _ = _gradient_owners(doc)
    return [(v.get("name") or f"v{v['id']}", v.get("shape"), _gradient(v, got))
            for v in doc.get("variables", []) if v.get("is_parameter") and not _idle(index, v, got)]


def idle_parameters(doc):
    """The parameters alive at the end that ``parameters`` leaves out, that no recorded op used even without
    grad and whose module was never called (a reloaded model evaluated under ``no_grad`` used its own: a fused
    kernel such as the transformer layer's eval path takes them without one op per parameter)."""
    index, got, used = _gradient_owners(doc)
    called = doc.get("modules") or {}
    return [v for v in doc.get("variables", []) if v.get("is_parameter") and _idle(index, v, got)
            and v["id"] not in used and _alive_at_end(v) and not _module_called(v, called)]


def _idle_note(idle):
    """`` (and 2 parameters that no op used and no optimizer was given, the first made at train.py:4)``: the line
    says which, since such a parameter often has no name (a module's weight that weight_norm replaced)."""
    if not idle:
        return ""
    made = where(idle[0].get("location")) if idle[0].get("location") else None
    at = "" if made is None else f", {'the first ' if len(idle) > 1 else ''}made at {made}"
    return f" (and {plural(len(idle), 'parameter')} that no op used and no optimizer was given{at})"


def _gradient_owners(doc):
    """The document's index; what got a gradient or was given to an optimizer; and the variables that were an
    input of a recorded op without a node (one run under ``no_grad``: a reloaded model evaluated)."""
    index = DocIndex(doc)
    got = set(index.leaf_norm)
    for event in doc.get("events", []):
        if event.get("kind") == "grad_write":
            got.add(event.get("variable"))
        elif event.get("kind") == "optimizer":
            got.update(("optimized", p) for p in event.get("parameters") or ())
    made = {v["id"]: _line_key(v.get("location")) for v in doc.get("variables", []) if v.get("is_parameter")}
    used = set()  # (its initialisation at the line that made it, ``init.*_`` writing into it, is not a use)
    for v in doc.get("variables", []):
        line = _line_key(v.get("location"))
        used.update(i for i in v.get("inputs") or () if i not in made or made[i] != line)
    return index, got, used


def _line_key(location):
    return None if not location else (location.get("file"), location.get("line"))


def _idle(index, v, got):
    """Not part of the model trained here: requires grad, no gradient, no optimizer, no graph used it."""
    vid = v["id"]
    return (not _frozen(v) and vid not in got and ("optimized", vid) not in got and v.get("accumulator") is None
            and not index.var_consumers(vid))


def _module_called(v, called):
    """Whether the module owning parameter ``v`` (named by its path, ``model.enc.layers.0.norm1.weight``), or one
    enclosing it, was called while tracing."""
    parts = (v.get("name") or "").split(".")
    return any(".".join(parts[:i]) in called for i in range(1, len(parts)))


def _alive_at_end(v):
    """``requires_grad_final`` is null for a variable that was gone when the trace stopped (documents written
    before the field: taken as alive)."""
    return "requires_grad_final" not in v or v["requires_grad_final"] is not None


def _frozen(v):
    return not v.get("requires_grad") or v.get("requires_grad_final") is False


def _gradient(v, got):
    if v["id"] in got:
        return "yes"
    return "frozen" if _frozen(v) else "none"


def structure_line(structure):
    """``structure 0: 9 nodes, seen 100× (iterations 0–99)`` — the name the picture files use too."""
    first, last = structure.get("iterations") or [None, None]
    span = f"iteration {first}" if first == last else f"iterations {first}–{last}"
    return f"structure {structure['id']}: {plural(structure.get('node_count') or 0, 'node')}, seen " \
           f"{structure.get('count')}× ({span})"


def _count(ranges):
    return sum(r["last"] - r["first"] + 1 for r in ranges)


def _iteration_ranges(ranges, most=6):
    """The schedule's full ranges as text: ``0–2, 8, 16, 32 …``."""
    parts = [f"{r['first']}" if r["first"] == r["last"] else f"{r['first']}–{r['last']}" for r in ranges]
    return ", ".join(parts[:most]) + (" …" if len(parts) > most else "") if parts else "none"


def _rank_standing_in(doc):
    """The rank whose document is a job's top level (under torchrun): its summary is that rank's, not the job's."""
    if (doc.get("job") or {}).get("main") != "rank":
        return None
    return (doc.get("process") or {}).get("rank")


def summary(doc):
    """Graphs and distinct structures, nodes, backward calls, whether each parameter got a gradient (the table
    lists those that did not), and the memory graphs held for backward."""
    structures = doc.get("structures", [])
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    grid.add_row("script", _data(display_path(doc.get("script")) or "(traced from Python)"))
    built = graphs_built(doc)
    dropped_section = doc.get("dropped") or {}
    distinct = len(structures) + (dropped_section.get("structures") or 0)
    schedule = doc.get("schedule") or {}
    light = schedule.get("light_iterations") or 0 if schedule.get("mode") == "light" else 0
    if light:  # the counts below are of the iterations recorded in full: say which those are
        recorded = _iteration_ranges(schedule.get("full") or ())
        total = max(doc.get("iterations") or 0, light + _count(schedule.get("full") or ()))
        grid.add_row("iterations", f"{plural(total, 'iteration')}: {total - light:,} recorded in full "
                                   f"({recorded}), {light:,} watched light")
    elided = dropped_section.get("elided_nodes")
    nodes = f"{plural(len(doc.get('nodes', [])), 'node')}" + (
        f", {elided:,} more elided (a graph above 5,000 nodes keeps its ends and diagnostic points)" if elided else "")
    made = f"{built:,} {'recorded' if light else 'built'}"
    if distinct == 1 and structures and not elided:  # one structure: on the same line, its node count said there
        grid.add_row("graphs", _data(f"{made}; {structure_line(structures[0])}"))
    else:
        grid.add_row("graphs", f"{made} ({nodes}), {plural(distinct, 'distinct structure')}")
        for structure in structures[:_MAX_STRUCTURES]:
            grid.add_row("", _data(structure_line(structure)))
        if distinct > _MAX_STRUCTURES:
            grid.add_row("", Text(f"+{distinct - _MAX_STRUCTURES:,} more, see report.html", style="dim"))
    light_backwards = ((schedule.get("light") or {}).get("backward_calls") or 0) if light else 0
    grid.add_row("backward calls", f"{backward_calls(doc) + light_backwards:,}" + (
        f" ({backward_calls(doc):,} recorded)" if light_backwards else ""))
    rank = _rank_standing_in(doc)
    if ending(doc):
        grid.add_row("script ended" if rank is None else f"rank {rank} ended", _data(ending(doc)))
    if backward_checks_text(doc):
        grid.add_row("backward checks", _data(backward_checks_text(doc)))
    dropped = dropped_section.get("iterations")
    if dropped:
        window = doc.get("window", 3)
        grid.add_row("records", f"full records for the first and last {window} iterations; "
                                f"{plural(dropped, 'iteration')} in between only counted")
    parts = [_heading("Summary" if rank is None else f"Summary of rank {rank} (the job is above)"), grid]
    params = parameters(doc)
    idle_note = _idle_note(idle_parameters(doc))
    missing = [p for p in params if p[2] == "none"]
    if not params:
        grid.add_row("parameters", _data("none" + idle_note))  # (a file name in it: no markup)
    else:
        grid.add_row("parameters", _data(f"{len(params)}, {_verdict(params, missing)}{idle_note}"))
    for label, value in memory_rows(doc):
        grid.add_row(label, value)
    if missing:  # only the parameters that need a look: the others are in report.html
        table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 2))
        table.add_column("without a gradient", overflow="fold")
        table.add_column("shape", no_wrap=True)
        for name, shape, _ in missing[:_MAX_PARAMETERS]:
            table.add_row(_data(name), _data("(" + ", ".join(str(d) for d in shape or []) + ")"))
        parts.append(Padding(table, (0, 0, 0, 2), expand=False))
        if len(missing) > _MAX_PARAMETERS:
            parts.append(Text(f"  … and {len(missing) - _MAX_PARAMETERS} more without a gradient", style="dim"))
    return Group(*parts)


def _verdict(params, missing):
    """``all got a gradient``, ``3 got no gradient``, ``4 frozen, the others all got a gradient``…"""
    frozen = sum(1 for p in params if p[2] == "frozen")
    trainable = len(params) - frozen
    if not trainable:
        return "all frozen"
    verdict = ("all got a gradient" if not missing else "none got a gradient" if len(missing) == trainable
               else f"{len(missing)} got no gradient")
    if not frozen:
        return verdict
    return f"{frozen} frozen, " + ("the others all got a gradient" if not missing else
                                   "none of the others got a gradient" if len(missing) == trainable else verdict)


def ending(doc):
    """How the script ended when it did not simply finish: ``sys.exit(3)``, ``KeyboardInterrupt (exit status
    130)``, ``ValueError: bad value``. Empty for a plain finish (or a document without the CLI's status)."""
    status = doc.get("status") or {}
    exc, code = status.get("exception"), status.get("exit_code")
    if status.get("ending") == "exit" and code:
        return f"sys.exit: exit status {code}"
    if exc:
        text = f"{exc.get('type')}: {exc.get('message')}" if exc.get("message") else str(exc.get("type"))
        return text + (f" (exit status {code})" if code else "")
    return ""


def explain_hint(diag):
    """The hint, ending with the command that explains the code."""
    command = f"gradviz explain {diag['code']}"
    hint = (diag.get("hint") or "").strip()
    if command in hint[-len(command) - 2:]:
        return hint
    return f"{hint} ({command})" if hint else command


def terminal_report(doc):
    """The whole report, to print in this order with a blank line between: the verdict and what qualifies it,
    the diagnostics (or the note that the run stopped), the summary. None where a part has nothing to say."""
    return [verdict(doc), diagnostics_blocks(doc), summary(doc)]


def verdict(doc):
    """The first line (``verdict.py``) in its colour; below it, the advice when the trace saw no graph and what
    ran beyond the trace's sight, since those qualify everything after them."""
    stopped = stopped_at(doc, where)
    text = verdict_text(doc, stopped)
    severities = {d.get("severity") for d in doc.get("diagnostics") or ()}
    clear = all_clear(dict(doc, diagnostics=[])) and stopped is None  # (info notes leave it clear)
    style = "bold red" if "error" in severities else "bold yellow" if severities - {"info"} or not clear \
        else "bold green"
    parts = [_data(text, style=style)]
    blind = [e for e in doc.get("unseen") or () if e.get("kind") == NO_AUTOGRAD]
    if text.startswith("gradviz saw no graph"):
        parts += [Padding(_data("advice: " + e["advice"], style="green"), (0, 0, 0, 3), expand=False)
                  for e in blind if e.get("advice")]
    beyond = unseen_block(doc)
    if beyond is not None:
        parts += [Text(""), beyond]
    return Group(*parts)


def diagnostics_blocks(doc):
    """One block per diagnostic: severity, code and ``file:line`` aligned on one line, then the message, the
    offending source line and the hint (ending with ``gradviz explain CODE``); the note that the run stopped
    after them. None when there are none (the verdict has said so, and where the run stopped)."""
    diagnostics = doc.get("diagnostics", [])
    if not diagnostics:
        return None
    stopped = stopped_note(doc)
    shown, rest = _gravest(diagnostics)
    severities = [terminal_safe(d.get("severity")) or "" for d in shown]
    codes = [terminal_safe(d.get("code")) or "" for d in shown]
    widths = [max(map(len, severities)), max(map(len, codes))]
    parts = []
    for number, diag in enumerate(shown):
        loc = diag.get("location") or {}
        line = Text()
        line.append(severities[number].ljust(widths[0]), style=SEVERITY_STYLE.get(diag.get("severity"), ""))
        line.append("  " + codes[number].ljust(widths[1]) + "  ", style="bold")
        line.append(terminal_safe(where(loc)))
        body = _data(diag.get("message"))
        if diag.get("count", 1) > 1:
            body.append(f" (×{diag['count']})", style="dim")
        block = [line, Padding(body, (0, 0, 0, 3), expand=False)]
        if loc.get("text"):
            source = _data(f"{loc.get('line')} │ {loc['text']}", style="cyan")
            source.no_wrap, source.overflow = True, "ellipsis"
            block.append(Padding(source, (0, 0, 0, 5), expand=False))
        block.append(Padding(_data("hint: " + explain_hint(diag), style="green"), (0, 0, 0, 3), expand=False))
        parts.append(Padding(Group(*block), (1 if number else 0, 0, 0, 1), expand=False))
    if rest:
        more = Text(f"+{len(rest)} more ({terminal_safe(severity_counts(rest))}), see report.html", style="dim")
        parts.append(Padding(more, (1, 0, 0, 1), expand=False))
    if stopped:
        parts.append(Padding(stopped, (1, 0, 0, 0), expand=False))
    return Group(*parts)


def unseen_block(doc):
    """What ran beyond the trace's sight (the document's ``unseen``, but for the ``no-autograd`` entry the verdict
    itself states), to print under the verdict; None when nothing."""
    others = [e for e in doc.get("unseen") or () if e.get("kind") != NO_AUTOGRAD]
    if not others:
        return None
    parts = [Text(f"Not seen by this trace ({len(others)})", style="bold yellow")]
    for entry in others:
        parts.append(Padding(_unseen_lines(entry), (0, 0, 0, 1), expand=False))
    return Group(*parts)


def _unseen_lines(entry):
    """One entry: ``kind  what (×count)``, then how, where and the advice, indented below."""
    head = Text()
    head.append(terminal_safe(entry.get("kind") or ""), style="bold")
    head.append("  ")
    head.append(terminal_safe(entry.get("what") or ""))
    if (entry.get("count") or 1) > 1:
        head.append(f" (×{entry['count']})", style="dim")
    lines = [head]
    if entry.get("how"):
        lines.append(Padding(_data("how: " + entry["how"]), (0, 0, 0, 3), expand=False))
    if entry.get("location"):
        lines.append(Padding(_data("at: " + where(entry["location"])), (0, 0, 0, 3), expand=False))
    if entry.get("advice"):
        lines.append(Padding(_data("advice: " + entry["advice"], style="green"), (0, 0, 0, 3), expand=False))
    return Group(*lines)


def _gravest(diagnostics):
    """(shown, rest): all when they fit ``_MAX_DIAGNOSTICS``; else the gravest that many, each list in the
    document's order."""
    if len(diagnostics) <= _MAX_DIAGNOSTICS:
        return list(diagnostics), []
    from ..document.vocabulary import severity_rank

    by_gravity = sorted(range(len(diagnostics)), key=lambda i: -severity_rank(diagnostics[i].get("severity")))
    chosen = set(by_gravity[:_MAX_DIAGNOSTICS])
    return ([d for i, d in enumerate(diagnostics) if i in chosen],
            [d for i, d in enumerate(diagnostics) if i not in chosen])


def stopped_note(doc):
    """When the run stopped at a name gradviz's engine lacks, after its diagnostics: say why, and that nothing
    after it was checked (without diagnostics the verdict says it all)."""
    status = doc.get("status") or {}
    name = status.get("unsupported")
    if not name or not doc.get("diagnostics"):
        return None
    location = (status.get("exception") or {}).get("location")
    at = f" at {where(location)}" if location else ""
    return _data(f"The run stopped{at}: `{name}` is not supported by gradviz's engine. The diagnostics above cover "
                 "the code before that point; nothing after it was checked.", style="bold yellow")


def memory_rows(doc, width=40):
    """The summary's rows for the saved tensors graphs held for backward: peak and at the end, then per
    iteration as a sparkline when it changed (red when it grew)."""
    memory = doc.get("memory") or {}
    series = memory.get("series") or []
    values = [s.get("retained_bytes", 0) for s in series]
    peak, final = human_bytes(memory.get("peak_retained_bytes", 0)), human_bytes(memory.get("final_retained_bytes", 0))
    if len(values) > 1 and not any(values):
        return [("memory", f"peak {peak} held for backward, 0 B after each of the {len(values)} iterations")]
    rows = [("memory", f"peak {peak} held for backward, {final} at the end")]
    if len(values) > 1:
        shown = values[-width:]
        growing = values[-1] > values[0]
        first = series[-len(shown)]
        line = Text(sparkline(shown), style="red" if growing else "green")
        line.append(f"  iterations {first.get('iteration')}–{series[-1].get('iteration')}: "
                    f"{human_bytes(shown[0])} → {human_bytes(shown[-1])}" + (" (growing)" if growing else ""))
        rows.append(("", line))
    return rows
