"""``Trace``: the public tracer, a thin facade over one ``TraceBuilder`` and the adapters of the engines it watches.

``with gradviz.trace() as tr:`` (or ``tr.start()`` / ``tr.stop()``) records what the engine does; read the result
with ``tr.to_dict()`` / ``tr.to_json(path)``, ``tr.memory``, ``tr.diagnostics``, ``tr.why_none(variable)``. How it
is split: docs/how-it-works.md ("The tracer: one builder, one adapter per engine").
"""

from .adapters import engine_names, make_adapter
from .builder import TraceBuilder
from .frames import user_frame


class Trace:
    """Record every variable, graph node, backward call and notable event while active.

    ``window`` is how many iterations are kept in full at the start and at the end of a long loop; ``engine``
    which engine to watch: ``"gradviz"`` (its own engine), ``"auto"`` (today the same), ``"torch"`` (real
    PyTorch, when its adapter is available); ``check_backward`` whether each custom ``Function``'s backward is
    checked numerically the first time it runs with given input shapes and dtypes (the wrong-backward diagnosis).
    """

    def __init__(self, window=3, engine="auto", check_backward=True):
        self.window = window
        self.engine = engine
        self.active = False
        self.builder = TraceBuilder(window)
        self.builder.checks.enabled = bool(check_backward)
        self.adapters = [make_adapter(name, self.builder) for name in engine_names(engine)]

    # ----- lifecycle ------------------------------------------------------------------------------------
    def start(self):
        if not self.active:
            for adapter in self.adapters:
                adapter.attach()
            self.active = True
            self.builder.stopped = False
        return self

    def stop(self):
        if self.active:
            frame = user_frame(2)
            for adapter in self.adapters:
                adapter.detach()
            self.active = False
            for adapter in self.adapters:
                adapter.finish(frame)
            self.builder.stop()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc is not None:  # a summary only: the exception's traceback would keep the user's frames alive
            self.adapters[0].raised(exc, tb)
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
        if self.active:
            frame = user_frame(3)
            for adapter in self.adapters:
                adapter.name_from_frame(frame)
                adapter.refresh()
        else:  # stopped: what the variables were at the stop stands, but a name given since is taken
            for adapter in self.adapters:
                adapter.refresh(requires_grad=False)
        return self.builder.document(with_diagnostics=with_diagnostics)

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

        return memory_section(self.builder)

    @property
    def diagnostics(self):
        return self.to_dict()["diagnostics"]

    def why_none(self, variable):
        """Why ``variable.grad`` is None: the classified cause, with the edge or line where the path breaks."""
        from ..diagnose import why_none

        vid = variable if isinstance(variable, int) else self.variable_id(variable)
        return why_none(self._document(False), vid)

    def variable_id(self, variable):
        """The id this trace gives ``variable`` (recording it now if it was never seen)."""
        for adapter in self.adapters:
            key = adapter.key_for_variable(variable)
            if key is not None:
                return self.builder.live_variables[key].id
        raise TypeError(f"not a variable of a traced engine: {type(variable).__name__}")

    def node_id(self, node):
        for adapter in self.adapters:
            key = adapter.key_for_node(node)
            if key is not None:
                return self.builder.live_nodes[key].id
        raise TypeError(f"not a graph node of a traced engine: {type(node).__name__}")

    def _repr_html_(self):
        """Jupyter shows a trace as its summary, graph and diagnostics."""
        from ..viz import notebook_html  # the facade, not rendering: tracing never imports rendering

        return notebook_html(self)

    def __repr__(self):
        s = self.stats
        state = "active" if self.active else ("stopped" if self.stopped else "not started")
        return (f"<gradviz.trace {state}: {s['nodes']} nodes, {s['graphs']} graphs, {s['backward_calls']} backward "
                f"calls, {s['iterations']} iterations>")
