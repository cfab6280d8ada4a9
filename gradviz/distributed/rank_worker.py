"""``python -m gradviz.distributed.rank_worker [-m] SCRIPT [ARGS]...``: one rank of a ``gradviz torchrun`` job
(``-m``: SCRIPT is a module, run as ``python -m`` runs it).

PyTorch's elastic launcher starts this module once per rank (its ``-m`` option), with RANK, LOCAL_RANK and
WORLD_SIZE set. It runs SCRIPT as ``__main__`` under a trace, exactly as ``gradviz run`` does, and writes the
rank's document to the job's ``processes/`` folder: when the script ends, raises, exits, or is told to stop
(SIGTERM, as torchrun sends when another rank fails or the job times out).
"""

import sys

from . import child, last_words
from .config import read
from .record import document_when_killed, save

HOW = "torchrun"


def main(argv=None):
    last_words.block_early()  # first of all: every thread torch and gloo start later inherits the mask
    whole_lines()
    argv = sys.argv[1:] if argv is None else argv
    config = read()
    if config is None or not argv:
        sys.stderr.write("gradviz: rank_worker is started by `gradviz torchrun`, not directly\n")
        return 2
    from contextlib import ExitStack

    from ..cli.runner import ScriptError, compile_module
    from ..cli.session import trace_script
    from .parent import noting_children
    from .rpc import RpcUse, note_unseen

    last = last_words.LastWords()
    rpc = RpcUse()
    noting = ExitStack()
    started_here = []

    def started(tr):
        rpc.start()
        child.install(config, inherited_trace=tr)  # this rank's own multiprocessing children, traced too
        started_here.append(noting.enter_context(noting_children()))  # and every process it starts, noted
        last.arm(lambda signal_name, where, when, sender: save(
            document_when_killed(tr), config, HOW, "killed", 128 + 15, stopped_at=where, signal_name=signal_name,
            signal_sender=sender, rpc=rpc.used, ended_at=when))

    module = None
    try:
        if argv[0] == "-m" and len(argv) > 1:
            module, argv = compile_module(argv[1]), [argv[1], *argv[2:]]
        traced = trace_script(argv[0], argv[1:], engine=config.get("engine", "auto"), module=module,
                              check_backward=config.get("check_backward", True),
                              exact_memory=config.get("exact_memory", False), schedule=config.get("schedule"),
                              started=started)
    except ScriptError as exc:
        sys.stderr.write(f"gradviz: {exc}\n")
        return 2
    last.ending()  # the script is over: a SIGTERM now waits for the document below
    result = traced.result
    noting.close()
    if started_here:
        _list_untraced_children(traced.doc, started_here[0], config)
    used_rpc = rpc.stop()
    if used_rpc:
        note_unseen(traced.doc)
    if result.exit_message:
        sys.stderr.write(result.exit_message + "\n")
    if result.exception is not None:
        sys.stderr.write(f"[rank {_rank()}] {result.traceback}")
    try:
        save(traced.doc, config, HOW, result.ending, result.exit_code, rpc=used_rpc, ended_at=result.ended_at)
    finally:
        last.done()
    return result.exit_code


def whole_lines():
    """torchrun starts each rank with ``python -u``: every piece of a ``print`` is its own write, so two ranks'
    lines interleave mid-line in the shared terminal. Line buffering keeps each line one write (as long as it is
    under the text layer's 8 KiB chunk), and still shows every line as soon as it ends."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(write_through=False, line_buffering=True)
        except (AttributeError, ValueError):  # replaced by something else, or closed: leave it as it is
            pass


def _list_untraced_children(doc, children, config):
    """The processes this rank started that left no document (its DataLoader workers, ``os._exit`` and killed
    children, Python ``Popen``s) go in its ``unseen``, as a traced script's do; the job's merge shows them with
    this rank's number."""
    from .merge import load_documents, not_traced

    if not (children.processes or children.subprocesses):
        return
    documents, _ = load_documents(config)
    doc["unseen"] = list(doc.get("unseen") or []) + not_traced(children.processes, documents, children.subprocesses)


def _rank():
    import os

    return os.environ.get("RANK", "?")


if __name__ == "__main__":
    sys.exit(main())
