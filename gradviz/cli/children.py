"""The processes a traced script starts, traced too, without a single-process run paying for it.

``gradviz run`` watches the script for the first process it starts (a ``multiprocessing`` start, a
``subprocess.Popen``). Only then does it load ``gradviz.distributed`` and arm the full watch
(``distributed.launch.ChildTracing``: the settings exported, children traced, each start noted), before that
first start goes ahead; at the end the children's documents are merged with the script's. A script that starts no
process never imports ``gradviz.distributed``: its document gets its ``process`` section here.
"""

import multiprocessing.process as mp_process
import os
import subprocess

from ..document.process import PROCESSES, process_section


class Children:
    """``started(tr)`` (given to ``trace_script``) watches for the script's first child; ``close()`` stops
    watching (idempotent); ``report(doc)`` gives the document to write: the script's, merged with its children's
    when it started any."""

    def __init__(self, out_dir, engine, check_backward, exact_memory, script, schedule=None):
        """``out_dir`` None: the children's documents go to a temporary folder, removed after the merge."""
        self.args = (out_dir, engine, check_backward, exact_memory, script, schedule)
        self.out_dir = out_dir
        self.armed = None  # the ChildTracing, once the script started a process
        self.failed = None  # why arming it failed (the children then run untraced)
        self._undo = []

    def started(self, tr):
        start, popen_init = mp_process.BaseProcess.start, subprocess.Popen.__init__
        children = self

        def first_start(process):
            children._arm(tr)
            return mp_process.BaseProcess.start(process)  # now the armed watch's: it notes the start

        def first_popen(popen, *args, **kwargs):
            children._arm(tr)
            return subprocess.Popen.__init__(popen, *args, **kwargs)

        mp_process.BaseProcess.start, subprocess.Popen.__init__ = first_start, first_popen
        self._undo = [lambda: setattr(mp_process.BaseProcess, "start", start),
                      lambda: setattr(subprocess.Popen, "__init__", popen_init)]

    def _arm(self, tr):
        self._unwatch()
        if self.armed is not None or self.failed is not None:
            return
        try:
            from ..distributed.launch import ChildTracing

            armed = ChildTracing(*self.args)
            armed.started(tr)
            self.armed = armed
        except Exception as exc:  # the script's start must happen as without the trace
            self.failed = {"where": PROCESSES, "type": type(exc).__name__, "message": str(exc).split("\n")[0]}

    def _unwatch(self):
        undo, self._undo = self._undo, []
        for step in undo:
            step()

    def close(self):
        self._unwatch()
        if self.armed is not None:
            self.armed.close()

    def report(self, doc):
        if self.failed is not None:
            doc.setdefault("internal_errors", []).append(self.failed)
        if self.armed is not None:
            return self.armed.report(doc)
        self.close()
        status = doc.get("status") or {}
        doc["process"] = process_section("main", status.get("ending", "finished"))
        if self.out_dir is not None:
            _clear_earlier_children(self.out_dir)
        return doc


def _clear_earlier_children(out_dir):
    """An earlier run's children's documents in the folder are not this run's: they go, as an armed run clears
    them (this loads the distributed package only when there are some)."""
    folder = os.path.join(out_dir, PROCESSES)
    if os.path.isdir(folder):
        from ..distributed.launch import forget_earlier_documents

        forget_earlier_documents(folder)

