"""The processes' documents become one report: the main document, the per-process documents side by side under
``ranks``, and a ``job`` summary (docs/trace-format.md "Job"). Documents in, a document out: nothing here runs a
trace or renders.

The top-level document stays a valid trace document (the traced script's own, or rank 0's under torchrun), so
everything that reads one still does; its ``diagnostics`` gain every process's, one entry per code and line with
``details.ranks``, and the DDP diagnostics over all ranks (``diagnose.ddp_rules.diagnose_job``) when present.
"""

import json
import os

from ..document.coverage import NO_AUTOGRAD, saw_autograd
from .child import DATALOADER_WORKER
from .config import PROCESSES


def load_documents(config):
    """This run's process documents (its ``run_id``) from the run's ``processes/`` folder, ordered by rank, then
    pid; unreadable files are skipped with a note in the second value."""
    docs, notes = [], []
    folder = config["folder"]
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return docs, notes
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            notes.append(f"{PROCESSES}/{name}: {exc}")
            continue
        process = doc.get("process") if isinstance(doc, dict) else None
        if isinstance(process, dict) and process.get("run_id") == config["run_id"]:
            process["file"] = f"{PROCESSES}/{name}"
            docs.append(doc)
    docs.sort(key=_order)
    return docs, notes


def _order(doc):
    process = doc["process"]
    rank = process.get("rank")
    return (rank is None, rank if rank is not None else 0, process.get("pid") or 0)


def merge(main, processes, started=(), subprocesses=(), how=None, timed_out=False):
    """The job's report. ``main`` is the traced script's document (None under torchrun: rank 0's, or the first
    process's, stands in); ``processes`` the per-process documents; ``started`` the ``multiprocessing`` starts
    the script made (``parent.Children.processes``) and ``subprocesses`` its Python interpreters started with
    ``Popen``: those that left no document are listed in ``unseen``, after them what each process listed there
    itself (with ``ranks``)."""
    if main is None and not processes:
        return None
    top = dict(main if main is not None else processes[0])
    main_is_process = main is None
    top["ranks"] = processes
    top["unseen"] = list(top.get("unseen") or []) + not_traced(started, processes, subprocesses)
    if not main_is_process:
        _work_in_children(top, processes)
    if main_is_process:  # rank 0's own children are listed with the other ranks', each entry with its ranks
        top["unseen"] = [e for e in top["unseen"] if e.get("kind") != CHILD_PROCESS]
        top["unseen"] += _processes_unseen(processes, 0, lambda e: e.get("kind") == CHILD_PROCESS)
        top["unseen"] += _processes_unseen(processes[1:], 1, lambda e: e.get("kind") != CHILD_PROCESS)
    else:
        top["unseen"] += _processes_unseen(processes, 0)
    untraced = _count_not_traced(top["unseen"])  # every process the job started that left no document
    top["diagnostics"] = _merged_diagnostics(top if not main_is_process else None, processes)
    top["job"] = job_summary(processes, how=how or _how(processes), main_is_rank=main_is_process,
                             started=len(started), not_traced=untraced, timed_out=timed_out,
                             diagnostics=top["diagnostics"])
    return top


def _work_in_children(top, processes):
    """The script's own process built no graph while its traced children did (an ``mp.spawn`` launcher): its
    ``no-autograd`` entry says where the work is instead of asking whether the script builds a graph at all."""
    entry = next((e for e in top["unseen"] if e.get("kind") == NO_AUTOGRAD), None)
    working = [_label(doc, i) for i, doc in enumerate(processes) if saw_autograd(doc)]
    if entry is None or not working:
        return
    entry = dict(entry)
    top["unseen"] = [entry if e.get("kind") == NO_AUTOGRAD else e for e in top["unseen"]]
    entry["how"] = (f"the script's own process built none; its traced child processes did "
                    f"({', '.join(working)}): their graphs, diagnostics and memory are in the job "
                    "table and under `ranks`")
    entry["advice"] = "read each process's section (report.html, Processes), or its document in processes/"


CHILD_PROCESS = "child-process"


def _processes_unseen(processes, first_position, keep=lambda entry: True):
    """What each process's trace could not see, one entry per (kind, what, how, location) with the ranks it was
    listed on (``ranks``) and ``count`` summed: the job's report never reads as an all-clear while a process says
    it missed something. A process that saw no graph at all shows that in the job table instead."""
    merged = {}
    for position, doc in enumerate(processes, first_position):
        rank = _label(doc, position)
        for entry in doc.get("unseen") or ():
            if entry.get("kind") == NO_AUTOGRAD or not keep(entry):
                continue
            location = entry.get("location") or {}
            key = (entry.get("kind"), entry.get("what"), entry.get("how"), location.get("file"), location.get("line"))
            found = merged.get(key)
            if found is None:
                merged[key] = dict(entry, ranks=[rank])
            else:
                found["count"] = (found.get("count") or 1) + (entry.get("count") or 1)
                if rank not in found["ranks"]:
                    found["ranks"].append(rank)
    for entry in merged.values():  # which process missed it, in words every report shows
        labels = entry.pop("ranks")
        entry["ranks"] = [int(label.split()[1]) for label in labels if label.startswith("rank ")]
        ranks = [label for label in labels if label.startswith("rank ")]
        said = f"ranks {', '.join(r[5:] for r in ranks)}" if len(ranks) == len(labels) > 1 else ", ".join(labels)
        entry["how"] = f"{entry.get('how') or 'not traced'} ({said})"
    return list(merged.values())


def _label(doc, position):
    """``rank N``, or ``pid N`` for a process with no rank (a child of a rank, a plain ``Process``): a child is
    never called by a rank it does not have."""
    process = doc.get("process") or {}
    if process.get("rank") is not None:
        return f"rank {process['rank']}"
    return f"pid {process.get('pid')}" if process.get("pid") is not None else f"process {position}"


def _how(processes):
    hows = {p["process"].get("how") for p in processes}
    return hows.pop() if len(hows) == 1 else "processes"


# ----- children that left no document ------------------------------------------------------------------------
def not_traced(started, processes, subprocesses):
    """``unseen`` entries for the ``started`` processes with no document among ``processes``, and for every
    Python ``subprocesses`` entry, counted by (how, line, what)."""
    seen = {doc["process"].get("pid") for doc in processes}
    entries = []
    for start in started:
        if start.get("pid") in seen:
            continue
        if start.get("how") == DATALOADER_WORKER:
            entries.append({"kind": CHILD_PROCESS, "count": 1, "how": start["how"], "location": start.get("location"),
                            "what": "DataLoader worker processes (they load data; not traced)",
                            "advice": "batches are traced from the moment the main process uses them; "
                                      "num_workers=0 traces the loading too"})
            continue
        entries.append({"kind": "child-process", "count": 1, "how": start.get("how"),
                        "location": start.get("location"),
                        "what": f"a process the script started left no document ({_why(start)})",
                        "advice": "let the child return from its target (os._exit and SIGKILL end it before gradviz "
                                  "can write; SIGTERM and exceptions are handled), and start it from the traced "
                                  "script with this interpreter"})
    helpers = {}  # library -> its one entry: every helper it starts is counted there, at the first one's line
    for sub in subprocesses:
        if sub.get("library") in helpers:
            helpers[sub["library"]]["count"] += 1
            continue
        if sub.get("library"):  # torch.compile's compile workers and the like: the library's, not the model's
            helpers[sub["library"]] = {
                "kind": CHILD_PROCESS, "count": 1, "how": sub["how"], "location": sub.get("location"),
                "what": f"{sub['library']}'s own helper processes (e.g. torch.compile's compile workers): they run "
                        "the library's work, not your model's graph",
                "advice": "nothing to do: the graph they serve is traced in the process that uses it"}
            entries.append(helpers[sub["library"]])
            continue
        entries.append({"kind": "child-process", "count": 1, "how": sub.get("how"), "location": sub.get("location"),
                        "what": "a Python interpreter started directly is not traced",
                        "advice": "trace it on its own (`gradviz run` on that script), or start it with "
                                  "multiprocessing / torch.multiprocessing.spawn, whose children are traced"})
    return _counted(entries)


def _why(start):
    code = start.get("exitcode")
    if code is None:
        return "still running, or never joined, when the script ended"
    if code < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"it exited with status {code} without gradviz's exit (os._exit, another interpreter)"


def _counted(entries):
    """One entry per (how, location, what), counted, in first-seen order."""
    merged = {}
    for entry in entries:
        loc = entry.get("location") or {}
        key = (entry["how"], loc.get("file"), loc.get("line"), entry["what"])
        if key in merged:
            merged[key]["count"] += 1
        else:
            merged[key] = entry
    return list(merged.values())


def _count_not_traced(unseen):
    return sum(e.get("count", 1) for e in unseen if e.get("kind") == "child-process")


# ----- diagnostics ---------------------------------------------------------------------------------------------
def _merged_diagnostics(main, processes):
    """The main document's diagnostics as they are (its node ids are the top level's), then each process's,
    one per (code, file, line) with the ranks it was seen on (node and variable ids dropped: they are the
    process's own, read them in ``ranks``), then the job-wide DDP diagnostics."""
    out = [dict(d) for d in (main.get("diagnostics") or [])] if main is not None else []
    keyed = {}
    ranked = any((doc.get("process") or {}).get("rank") is not None for doc in processes)
    for position, doc in enumerate(processes):
        rank = (doc.get("process") or {}).get("rank")
        # a process with no rank among ranks (a rank's child) is named by its pid, never by a rank it lacks
        field, who = ("processes", _label(doc, position)) if rank is None and ranked else \
            ("ranks", rank if rank is not None else position)
        own = main is None and position == 0  # the top level is this process's document
        for diag in doc.get("diagnostics") or []:
            loc = diag.get("location") or {}
            key = (diag.get("code"), loc.get("file"), loc.get("line"))
            if key in keyed:
                entry = keyed[key]
                named = entry["details"].setdefault(field, [])
                if who not in named:
                    named.append(who)
                entry["count"] = entry.get("count", 1) + diag.get("count", 1)
                continue
            entry = dict(diag)
            entry["details"] = dict(diag.get("details") or {}, ranks=[])
            entry["details"][field] = [who]
            if not own:
                entry.update(nodes=[], variables=[], links=[])
            keyed[key] = entry
            out.append(entry)
    for i, diag in enumerate(out):
        diag["id"] = i
    job = _job_diagnostics(_compared(processes))
    moved = {diag.get("id", i): len(out) + i for i, diag in enumerate(job)}  # their links name their own ids
    for i, diag in enumerate(job):
        diag["id"] = len(out) + i
        diag["links"] = [moved[link] for link in diag.get("links") or [] if link in moved]
    return causes_first(out + job)


# a diagnostic that follows from another: (effect, cause, why). With find_unused_parameters=False, a parameter
# no rank's backward reached leaves DDP's reduction unfinished, and the gradients the ranks step with differ
CONSEQUENCES = (("ddp-grad-mismatch", "ddp-unused-parameters",
                 "DDP's reduction never finished because of the unused parameters"),)


def causes_first(diagnostics):
    """Each diagnostic that follows from another one present is moved right after it and linked to it
    (``details.caused_by`` is the cause's id, a related line, and a hint that sends to the cause first); ids
    and links are renumbered to the new order."""
    order = list(diagnostics)
    effects = {}
    for effect_code, cause_code, why in CONSEQUENCES:
        cause = next((d for d in order if d.get("code") == cause_code), None)
        for effect in [d for d in order if d.get("code") == effect_code] if cause is not None else ():
            order.remove(effect)
            order.insert(order.index(cause) + 1 + sum(1 for e in effects.values() if e[0] is cause), effect)
            effects[id(effect)] = (cause, why)
    position = {id(d): i for i, d in enumerate(diagnostics)}  # a diagnostic's id is its position here
    renumber = {position[id(d)]: new for new, d in enumerate(order)}
    out = []
    for new, diag in enumerate(order):
        diag = dict(diag, id=new, links=sorted({renumber[link] for link in diag.get("links") or []
                                                if link in renumber}))
        if id(order[new]) in effects:
            cause, why = effects[id(order[new])]
            cause_id = order.index(cause)
            diag["details"] = dict(diag.get("details") or {}, caused_by=cause_id)
            diag["links"] = sorted(set(diag["links"]) | {cause_id})
            diag["message"] = f"{diag['message']} (a consequence of `{cause['code']}` above: {why})"
            diag["hint"] = (f"Fix `{cause['code']}` first (at {_line(cause.get('location'))}); this follows from "
                            f"it. {diag.get('hint') or ''}").strip()
            diag["related"] = [*(diag.get("related") or []),
                               {"role": f"cause: {cause['code']}", "location": cause.get("location")}]
        out.append(diag)
    for diag in out:  # the cause links back to what it caused
        caused_by = (diag.get("details") or {}).get("caused_by")
        if caused_by is not None:
            out[caused_by]["links"] = sorted(set(out[caused_by]["links"]) | {diag["id"]})
    return out


def _line(location):
    if not location:
        return "its line"
    return f"{os.path.basename(str(location.get('file')))}:{location.get('line')}"


def _key(doc, position):
    """A process's key in ``structures`` and ``first_divergence``: its rank as text ("0"), or ``pid N`` for a
    process with no rank (a plain ``multiprocessing`` child), as the table calls it: never a position."""
    rank = (doc.get("process") or {}).get("rank")
    return str(rank) if rank is not None else _label(doc, position)


def _compared(processes):
    """The processes whose graphs and gradients are compared with each other: the ranks when there are any (a
    rank's own children, which have none, do other work), else every process (a script's plain children)."""
    ranked = [d for d in processes if (d.get("process") or {}).get("rank") is not None]
    return ranked or list(processes)


def _job_diagnostics(processes):
    try:
        from ..diagnose.ddp_rules import diagnose_job
    except ImportError:  # the DDP rules are optional
        return []
    if len(processes) < 2:
        return []
    try:
        return [dict(d) for d in diagnose_job(processes)]
    except Exception as exc:  # a failing rule must not cost the report
        return [{"code": "internal-error", "severity": "info", "message": f"the DDP rules failed: {exc}",
                 "location": None, "details": {"ranks": []}}]


# ----- the job summary -----------------------------------------------------------------------------------------
def job_summary(processes, how, main_is_rank, started=0, not_traced=0, timed_out=False, diagnostics=None):
    """``{"how", "world_size", "main", "processes": [...], "structures": [...], "first_divergence", "rpc",
    "stopped": [...], "started", "not_traced"}`` (docs/trace-format.md "Job"). Processes that used RPC each play
    their own part (a trainer, a parameter server): ``rpc`` lists their ranks, and their graphs are not compared
    for the first divergence, which is a question about ranks that should build the same graphs."""
    from .verdict import job_verdict

    rows = [_process_row(doc, position) for position, doc in enumerate(processes)]
    _who_stopped_them(rows)
    if diagnostics is not None:
        _count_job_diagnostics(rows, diagnostics)
    sizes = {doc["process"].get("world_size") for doc in processes} - {None}
    ranked = [row for row in rows if row["rank"] is not None]
    world_size = sizes.pop() if len(sizes) == 1 else (len(ranked) or None)
    return {"how": how, "world_size": world_size, "verdict": job_verdict(rows, world_size, timed_out),
            "main": "rank" if main_is_rank else "script",
            "processes": rows, "structures": _structures_by_rank(processes),
            "first_divergence": first_divergence([d for d in _compared(processes) if not d["process"].get("rpc")]),
            "rpc": [row["rank"] for row in rows if row["rpc"]],
            "stopped": [{"rank": r["rank"], "pid": r["pid"], "status": r["status"], "location": r["stopped_at"],
                         "reason": r["reason"]} for r in rows if r["status"] != "finished"],
            "started": started, "not_traced": not_traced}


def _who_stopped_them(rows):
    """Each killed row's ``stopped_by``: ``launcher`` when the signal came from the process that started it or
    from the ranks' launcher (torchrun tearing the job down, a timeout through it), ``outside`` when another
    process sent it (a ``kill`` by hand, a scheduler, another rank): a rank stopped from outside failed on its own,
    and its reason says by whom. None when the sender is not known (a plain signal handler cannot tell)."""
    launchers = {r["parent_pid"] for r in rows if r.get("how") == "torchrun"} - {None}
    for row in rows:
        sender = row.pop("signal_sender", None)
        if row.get("status") != "killed" or not sender:
            row["stopped_by"] = None
            continue
        row["stopped_by"] = "launcher" if sender in launchers or sender == row.get("parent_pid") else "outside"
        if row["stopped_by"] == "outside":
            row["reason"] = f"{row['reason'][:-1]} from pid {sender}, not the launcher)"


def _count_job_diagnostics(rows, diagnostics):
    """Each row's ``diagnostics``: the merged diagnostics that name its rank (its own and the job-level ones
    about it), so the table never says 0 above a warning about that rank."""
    for row in rows:
        if row["rank"] is None:
            continue
        row["diagnostics"] = sum(1 for d in diagnostics if row["rank"] in ((d.get("details") or {}).get("ranks") or ()))


def _process_row(doc, position):
    process, status = doc["process"], doc.get("status") or {}
    exception = status.get("exception") or None
    stopped_at, reason = process.get("stopped_at"), None
    if process.get("status") == "killed":
        reason = f"killed ({status.get('signal') or 'signal'})"
    elif exception:
        stopped_at = exception.get("location")
        reason = f"{exception.get('type')}: {exception.get('message')}"
    elif status.get("exit_code"):
        reason = f"exit status {status.get('exit_code')}"
    memory = doc.get("memory") or {}
    return {"rank": process.get("rank"), "pid": process.get("pid"), "how": process.get("how"),
            "status": process.get("status"), "exit_code": status.get("exit_code"), "stopped_at": stopped_at,
            "reason": reason, "iterations": doc.get("iterations", 0), "graphs": len(doc.get("graphs") or []),
            "backwards": len(doc.get("backwards") or []),
            "structures": [s.get("signature") for s in doc.get("structures") or []],
            "peak_retained_bytes": memory.get("peak_retained_bytes", 0),
            "final_retained_bytes": memory.get("final_retained_bytes", 0),
            "diagnostics": len(doc.get("diagnostics") or []), "file": process.get("file"),
            "rpc": bool(process.get("rpc")), "ended_at": status.get("ended_at"), "ddp": bool(doc.get("ddp")),
            "parent_pid": process.get("parent_pid"), "signal_sender": status.get("signal_sender")}


def _structures_by_rank(processes):
    """Each structure (by signature) with the processes that built it and how often: ``ranks`` (their ranks),
    ``processes`` (those with no rank, as ``pid N``), ``counts`` and ``first_iteration`` keyed by ``_key``."""
    table = {}
    for position, doc in enumerate(processes):
        rank, key = (doc.get("process") or {}).get("rank"), _key(doc, position)
        for s in doc.get("structures") or []:
            entry = table.setdefault(s.get("signature"), {"signature": s.get("signature"),
                                                          "node_count": s.get("node_count"), "ranks": [],
                                                          "processes": [], "counts": {}, "first_iteration": {}})
            named, who = (entry["ranks"], rank) if rank is not None else (entry["processes"], key)
            if who not in named:
                named.append(who)
            entry["counts"][key] = entry["counts"].get(key, 0) + s.get("count", 0)
            first = (s.get("iterations") or [None])[0]
            entry["first_iteration"][key] = first
    return list(table.values())


def first_divergence(processes):
    """The first iteration at which the ranks' graphs differ: ``{"iteration", "by_rank": {key: [signatures]}}``
    (a rank as text, ``pid N`` for a process with no rank) or None. Compared where every rank kept the
    iteration's graphs, and at the first iteration of any structure that not every rank built."""
    if len(processes) < 2:
        return None
    per_rank = []
    for position, doc in enumerate(processes):
        signature = {s.get("id"): s.get("signature") for s in doc.get("structures") or []}
        by_iteration = {}
        for graph in doc.get("graphs") or []:
            by_iteration.setdefault(graph.get("iteration"), []).append(signature.get(graph.get("structure")))
        per_rank.append((_key(doc, position), by_iteration, doc))
    candidates = []
    common = set.intersection(*(set(it) for _, it, _ in per_rank))
    for iteration in sorted(i for i in common if i is not None):
        if len({tuple(sorted(s or "" for s in it[iteration])) for _, it, _ in per_rank}) > 1:
            candidates.append(iteration)
            break
    everywhere = set.intersection(*({s.get("signature") for s in d.get("structures") or []} for _, _, d in per_rank))
    for _, _, doc in per_rank:
        for s in doc.get("structures") or []:
            if s.get("signature") not in everywhere and s.get("iterations"):
                candidates.append(s["iterations"][0])
    if not candidates:
        return None
    iteration = min(candidates)
    return {"iteration": iteration,
            "by_rank": {key: sorted(s or "" for s in it.get(iteration, [])) for key, it, _ in per_rank}}
