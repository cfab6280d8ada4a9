"""Beyond one process: child processes and torchrun ranks traced, their documents merged into one job report.

How the pieces fit (docs/distributed.md):

- ``config``: what a traced run tells the processes it starts (one environment variable), and how a child finds
  its own document's name in the run's folder.
- ``bootstrap/sitecustomize.py``: put first on a spawned child's ``PYTHONPATH``; it loads ``child`` in
  ``multiprocessing`` children only, then hands over to any other ``sitecustomize``.
- ``child``: a ``multiprocessing`` process (spawn, forkserver or fork) runs its target under a fresh trace and
  writes its own document; ``last_words`` writes it on SIGTERM too, from a thread, even while the main thread is
  stuck in a collective.
- ``parent``: while the traced script runs, notes every process it starts (and Python subprocesses, which are
  not traced) so the report can say which children left no document, and why.
- ``rank_worker`` / ``launch``: ``gradviz torchrun`` runs PyTorch's own elastic launcher with each rank running
  its script under ``rank_worker``.
- ``merge``: the per-process documents become one report: the main document plus ``ranks`` and ``job``.

Documents only cross process boundaries as files; nothing here renders.
"""
