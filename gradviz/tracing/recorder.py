"""``Trace``: the public tracer, a thin facade over one ``TraceBuilder`` and the adapters of the engines it watches.

``with gradviz.trace() as tr:`` (or ``tr.start()`` / ``tr.stop()``) records what the engine does; read the result
with ``tr.to_dict()`` / ``tr.to_json(path)``, ``tr.memory``, ``tr.diagnostics``, ``tr.why_none(variable)``. How it
is split: docs/how-it-works.md ("The tracer: one builder, one adapter per engine").
"""

from .adapters import engine_names, make_adapter
from .builder import TraceBuilder
from .frames import user_frame

_ACTIVE_ERROR = ("this gradviz.trace is already active: a trace records one block at a time (`with tr:` inside "
                 "`with tr:`, or start() twice); use one block, or a new gradviz.trace() for the inner one")


class Trace:
    """Record every variable, graph node, backward call and notable event while active.

    ``window`` is how many iterations are kept in full at the start and at the end of a long loop; ``engine``
    which engine to watch: ``"gradviz"`` (its own engine), ``"auto"`` (today the same), ``"torch"`` (real
    PyTorch, when its adapter is available); ``check_backward`` whether each custom ``Function``'s backward is
    checked numerically the first time it runs with given input shapes and dtypes (the wrong-backward diagnosis);
    ``exact_memory`` whether the torch adapter measures saved memory from ``saved_tensors_hooks`` packs instead of
    the nodes' saved attributes (docs/torch-backend.md; gradviz's own engine measures it exactly either way).

    ``light=True`` traces in full only the first ``full_steps`` iterations (default: ``window``), sampled ones
    after them (8, 16, 32…), a new structure's, and those after a finding; the others are light (no per-op
    records: the loss's NaN/Inf, graphs alive, gradient norms). ``trace_steps=(first, last)`` traces exactly
    those iterations in full and the others light. See docs/how-it-works.md, "Light iterations".

    Threads: ops from every thread the traced code starts (``threading.Thread``, executors, ``asyncio.to_thread``)
    are recorded; threads already running when the trace started are not, and the document lists them
    (``threads``). ``stop()`` may be called from any thread. Entering a trace that is already active raises
    ``RuntimeError`` (see docs/api.md).
    """

    def __init__(self, window=3, engine="auto", check_backward=True, exact_memory=False, light=False,
                 full_steps=None, trace_steps=None):
        if isinstance(window, bool) or not isinstance(window, int):
            raise TypeError(f"gradviz.trace(): window must be an int (iterations kept in full at each end of a "
                            f"loop), got {type(window).__name__} {window!r}")
        if window < 1:
            raise ValueError(f"gradviz.trace(): window must be at least 1, got {window}")
        if not isinstance(engine, str):
            raise TypeError(f"gradviz.trace(): engine must be a string, got {type(engine).__name__} {engine!r}")
        self.window = window
        self.engine = engine
        self.active = False
        self.user_scope = None  # the traced script's globals, when a runner gives them (holders at the stop)
        self.builder = TraceBuilder(window)
        self.builder.checks.enabled = bool(check_backward)
        if not isinstance(exact_memory, bool):
            raise TypeError(f"gradviz.trace(): exact_memory must be True or False, got "
                            f"{type(exact_memory).__name__} {exact_memory!r}")
        self.builder.use_schedule(_schedule(light, window if full_steps is None else full_steps, trace_steps))
        self.adapters = [make_adapter(name, self.builder) for name in engine_names(engine)]
        if exact_memory:
            for adapter in self.adapters:
                if hasattr(type(adapter), "exact_memory"):  # the torch adapter's; gradviz's is exact already
                    adapter.exact_memory()

    # ----- lifecycle ------------------------------------------------------------------------------------
    def start(self):
        """Start recording (in this context, and in every thread started from now on). Raises RuntimeError if
        the trace is already active; a stopped trace may be started again (the records go on)."""
        with self.builder:
            if self.active:
                raise RuntimeError(_ACTIVE_ERROR)
            self.builder.note_running_threads()
            for adapter in self.adapters:
                adapter.attach()
            self.active = True
            self.builder.stopped = False
        return self

    def stop(self):
        """Stop recording, everywhere (from any thread: every context and thread the trace is attached in stops
        reporting). Stopping a stopped trace does nothing."""
        with self.builder:  # no callback is half way; none starts after this
            if not self.active:
                for adapter in self.adapters:  # stopped elsewhere: leave this context too
                    adapter.detach()
                return self
            frame = user_frame(2)
            for adapter in self.adapters:
                adapter.detach()
            self.active = False
            try:
                for adapter in self.adapters:
                    adapter.finish(frame)
                self._note_holders(frame)
            except Exception as exc:  # names and final states are a nicety: the trace must still stop
                self.builder.internal_error("stop", exc)
            try:
                self.builder.stop()
            except Exception as exc:  # never raised into the user's code: the document says so instead
                self.builder.internal_error("stop", exc)
        return self

    def _note_holders(self, frame):
        """The user's containers that hold graph outputs now (``history.append(loss)``): the script's globals
        (``user_scope``, given by ``gradviz run``) or the frame that stopped the trace."""
        from .frames import _CO_OPTIMIZED, _locals
        from .holders import graph_holders

        scopes = [list(self.user_scope.items())] if self.user_scope is not None else []
        filename = self.builder.script
        if frame is not None:  # (its locals read without leaving the frame a cached copy that keeps them alive)
            if frame.f_code.co_flags & _CO_OPTIMIZED:
                scopes.append(_locals(frame))
            scopes.append(list(frame.f_globals.items()))
            filename = filename or frame.f_code.co_filename
        self.user_scope = None  # (the script's globals are not the trace's to keep)
        found = []
        for adapter in self.adapters:
            found += graph_holders(scopes, filename, adapter.is_graph_output)
        self.builder.holders = found

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc is not None:  # a summary only: the exception's traceback would keep the user's frames alive
            try:
                with self.builder:
                    self.adapters[0].raised(exc, tb)
            except Exception as error:  # never replace the user's exception with one of ours
                self.builder.internal_error("raised", error)
        self.stop()
        return False

    # ----- what the builder holds ------------------------------------------------------------------------
    @property
    def stopped(self):
        return self.builder.stopped

    @property
    def script(self):
        return self.builder.script

    @script.setter
    def script(self, path):
        self.builder.script = path

    @property
    def exception(self):
        return self.builder.exception

    @property
    def groups(self):
        return self.builder.groups

    @property
    def stats(self):
        """Cheap live counters for a progress line (safe to poll from another thread)."""
        return self.builder.stats

    # ----- results ------------------------------------------------------------------------------------------
    def _document(self, with_diagnostics):
        frame = user_frame(3) if self.active else None
        with self.builder:  # what the engine says now, without another thread's facts half way
            try:
                if self.active:
                    for adapter in self.adapters:
                        adapter.name_from_frame(frame)
                        adapter.refresh()
                else:  # stopped: what the variables were at the stop stands, but a name given since is taken
                    for adapter in self.adapters:
                        adapter.refresh(requires_grad=False)
            except Exception as exc:  # names are a nicety: the document must still be built
                self.builder.internal_error("refresh", exc)
        return self.builder.document(with_diagnostics=with_diagnostics)  # its records: a snapshot under the lock

    def to_dict(self):
        """The trace document (``gradviz-trace`` version 1, see docs/trace-format.md), with diagnostics."""
        return self._document(True)

    def to_json(self, path):
        from .document import write_json

        write_json(self.to_dict(), path)
        return path

    @property
    def memory(self):
        """``{"peak_retained_bytes", "final_retained_bytes", "series", "graphs"}`` (see docs/trace-format.md)."""
        from .document import memory_section

        with self.builder:
            return memory_section(self.builder)

    @property
    def diagnostics(self):
        return self.to_dict()["diagnostics"]

    def why_none(self, variable):
        """Why ``variable.grad`` is None: the classified cause, with the edge or line where the path breaks.
        ``variable`` is a Variable (Tensor) or its id in the trace document."""
        from ..diagnose import why_none

        if isinstance(variable, int) and not isinstance(variable, bool):
            vid = variable
        else:
            vid = self._variable_id(variable, "why_none(): variable")
        return why_none(self._document(False), vid)

    def variable_id(self, variable):
        """The id this trace gives ``variable`` (recording it now if it was never seen)."""
        return self._variable_id(variable, "variable_id(): variable")

    def _variable_id(self, variable, what):
        with self.builder:
            for adapter in self.adapters:
                key = adapter.key_for_variable(variable)
                if key is not None:
                    return self.builder.live_variables[key].id
        raise TypeError(f"{what} must be a Tensor of a traced engine or a variable id (int), got "
                        f"{type(variable).__name__}{_shown(variable)}")

    def node_id(self, node):
        """The id this trace gives graph node ``node`` (a ``grad_fn``), recording it now if it was never seen."""
        with self.builder:
            for adapter in self.adapters:
                key = adapter.key_for_node(node)
                if key is not None:
                    return self.builder.live_nodes[key].id
        raise TypeError(f"node_id(): node must be a graph node (a grad_fn) of a traced engine, got "
                        f"{type(node).__name__}{_shown(node)}")

    def _repr_html_(self):
        """Jupyter shows a trace as its summary, graph and diagnostics."""
        from ..viz import notebook_html  # the facade, not rendering: tracing never imports rendering

        return notebook_html(self)

    def __repr__(self):
        s = self.stats
        state = "active" if self.active else ("stopped" if self.stopped else "not started")
        return (f"<gradviz.trace {state}: {s['nodes']} nodes, {s['graphs']} graphs, {s['backward_calls']} backward "
                f"calls, {s['iterations']} iterations>")


def _schedule(light, full_steps, trace_steps):
    from .schedule import Schedule

    if not isinstance(light, bool):
        raise TypeError(f"gradviz.trace(): light must be True or False, got {type(light).__name__} {light!r}")
    if isinstance(full_steps, bool) or not isinstance(full_steps, int) or full_steps < 0:
        raise ValueError(f"gradviz.trace(): full_steps must be a whole number >= 0, got {full_steps!r}")
    if trace_steps is not None:
        ok = isinstance(trace_steps, (tuple, list)) and len(trace_steps) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in trace_steps)
        if not ok or not 0 <= trace_steps[0] <= trace_steps[1]:
            raise ValueError(f"gradviz.trace(): trace_steps must be (first, last) iterations with 0 <= first <= last, "
                             f"got {trace_steps!r}")
        return Schedule(light=True, full_steps=full_steps, trace_steps=tuple(trace_steps))
    return Schedule(light=light, full_steps=full_steps)


def _shown(value):
    """`` 'y1'`` for a short str or number in an error message, nothing for anything else."""
    if isinstance(value, (str, int, float)) and len(repr(value)) <= 40:
        return f" {value!r}"
    return ""
