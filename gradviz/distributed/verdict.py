"""The job's verdict: which process failed first, or which rank the others were waiting for, with the knock-on
failures grouped under it (docs/trace-format.md "Job", ``verdict``). Rows in (``merge._process_row``), a dict out.

A rank that raises takes the job down: the others then fail in their collective ("Connection reset by peer") or
are stopped by torchrun's SIGTERM, and every one of them has a line. What a person needs is the first of them in
time: each process document says when it stopped (``status.ended_at``, taken when the script raised or the
signal arrived, before the document was built), and a SIGTERM's sender (``status.signal_sender``) tells the
launcher's teardown, which is never the first failure, from a ``kill`` sent from outside, which is one. A hang
is different: nobody failed, the job was stopped (its ``--timeout``), and every rank was killed at once by the
launcher; then the ranks that were inside a collective were waiting, and the one that was not is the one they
waited for.
"""

# ranks killed within this many seconds of each other were stopped together (a timeout, Ctrl-C): not one by one
_TOGETHER_SECONDS = 2.0


def job_verdict(rows, world_size=None, timed_out=False):
    """``{"kind": "crash" | "killed" | "hang" | "missing", "rank", "pid", "location", "reason", "waiting_in",
    "waiting": [...], "knock_on": [...]}`` or None when every process finished."""
    failed = [r for r in rows if r.get("status") != "finished" or r.get("exit_code")]
    missing = _missing_ranks(rows, world_size)
    if not failed and not missing:
        return None
    killed = [r for r in failed if r.get("status") == "killed"]
    from_outside = any(r.get("stopped_by") == "outside" for r in killed)
    if failed and len(killed) == len(failed) and (timed_out or _together(killed)) and not missing \
            and not from_outside:
        return _hang(killed, rows)
    if missing:  # a rank that left no document died first (SIGKILL, the OOM killer, os._exit): the rest followed
        first = {"kind": "missing", "rank": missing[0], "pid": None, "location": None, "waiting_in": None,
                 "reason": "left no document: killed by SIGKILL (the OOM killer, `kill -9`) or ended by os._exit",
                 "missing": missing}
        return dict(first, knock_on=[_entry(r) for r in _by_time(failed)])
    ordered = _by_time(failed)
    head = ordered[0]
    kind = "killed" if head.get("status") == "killed" else "crash"
    return dict(_entry(head), kind=kind, knock_on=[_entry(r) for r in ordered[1:]])


def _missing_ranks(rows, world_size):
    if not world_size:
        return []
    ranks = {r.get("rank") for r in rows if r.get("how") == "torchrun"}
    if not ranks:
        return []
    return sorted(set(range(world_size)) - ranks)


def _together(killed):
    times = [r["ended_at"] for r in killed if r.get("ended_at") is not None]
    return len(killed) > 1 and len(times) == len(killed) and max(times) - min(times) <= _TOGETHER_SECONDS


def _by_time(rows):
    """Earliest first; a process the launcher stopped (its teardown after another failure) after every process
    that failed on its own, whatever the clocks say; a process with no time (an older document) after those with
    one."""
    return sorted(rows, key=lambda r: (r.get("stopped_by") == "launcher", r.get("ended_at") is None,
                                       r.get("ended_at") or 0.0, r.get("rank") or 0))


def _entry(row):
    return {"rank": row.get("rank"), "pid": row.get("pid"), "location": row.get("stopped_at"),
            "reason": row.get("reason"), "waiting_in": _collective(row), "ended_at": row.get("ended_at")}


def _collective(row):
    """The collective a process was stopped in: a ``torch.distributed`` call, DDP's forward, or a backward of a
    rank that used DDP (its gradient all-reduce); None otherwise."""
    waiting = (row.get("stopped_at") or {}).get("waiting_in")
    if waiting == "backward" and not row.get("ddp"):
        return None
    return waiting


def _hang(killed, rows):
    """Every process was stopped from outside at once: those in a collective were waiting; the others (not in
    one) are who they waited for, named first. When all were in one, no rank is to blame: say where each was."""
    waiting = [r for r in killed if _collective(r)]
    culprits = [r for r in killed if not _collective(r)]
    collective = next((_collective(r) for r in waiting), None)
    if culprits:
        head = culprits[0]
        return dict(_entry(head), kind="hang", waiting_in=None, collective=collective,
                    reason=f"the other ranks waited for it in `{collective}`" if collective else
                    "stopped while the others were stopped too",
                    waiting=[_entry(r) for r in waiting], knock_on=[_entry(r) for r in culprits[1:]])
    return {"kind": "hang", "rank": None, "pid": None, "location": None, "collective": collective,
            "reason": "every rank was waiting in a collective: none was left to finish it (mismatched collectives)",
            "waiting_in": None, "waiting": [_entry(r) for r in waiting], "knock_on": []}
