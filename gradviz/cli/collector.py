"""The cyclic garbage collector around gradviz's own work in a ``gradviz run`` process, outside the script.

With torch loaded a full collection walks every object of the process (~2*10^5, 0.1-0.2 s each) and, on what
gradviz adds at start and at the end, frees next to nothing (docs/performance.md). Two things keep such walks out
of a run without changing what the script's own code sees:

- ``paused``: gradviz's modules, imported after torch (the script's import, collected as usual), are made with the
  collector off: they live until the process ends, and the full collection their objects set off walked torch's
  heap to free nothing (one a run, ~0.1 s);
- ``frozen``: from just before the script to the end of the run, what exists is out of the full collections'
  sight (``gc.freeze``), as the torch adapter does while attached (its own freeze then stays out of the way).
  Once the script has ended, ``settle`` collects what the run made (the trace and the script's globals are dead
  in reference cycles by then) and freezes the rest (the document), so the report's and pictures' own garbage
  is still collected but no full collection walks the whole heap again: on a 1,000-episode REINFORCE run, one
  collection of 0.12 s where the whole heap's took 0.21 s during the pictures, and a lower peak (the trace is
  freed before the report is made). Everything is given back to the collector when the run ends (an in-process
  caller keeps its heap).

Nothing changes when the collector is off or the program froze objects itself.
"""

import gc
from contextlib import contextmanager


@contextmanager
def paused():
    """The collector off for the block (unless it already is)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Frozen:
    def __init__(self, on):
        self.on = on

    def settle(self):
        """The script and its trace are over: one collection of what they made (the heap from before is frozen),
        which frees the trace and the script's globals, dead in reference cycles by now, before the report and
        pictures are made; then what is left is frozen too."""
        if self.on and gc.isenabled():
            gc.collect()
            gc.freeze()


@contextmanager
def frozen():
    """What exists is frozen for the block, and given back at its end; yields an object whose ``settle()`` is
    called once the script has ended."""
    on = gc.isenabled() and not gc.get_freeze_count()
    if on:
        gc.freeze()
    try:
        yield _Frozen(on)
    finally:
        if on:
            gc.unfreeze()
