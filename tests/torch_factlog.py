"""A builder double that logs facts (for testing the torch adapter's mechanisms in isolation)."""
import itertools

from gradviz.tracing.builder import OutputFact, SavedFact


class Rec:
    def __init__(self, rid, origin=None, handle=None, name=None):
        self.id, self.origin, self.handle, self.name = rid, origin, handle, name


class FactLog:
    def __init__(self):
        self.facts = []
        self.live_variables = {}
        self.live_nodes = {}
        self.internal_errors = []
        self.saved_storages = {}  # the builder's index of saved memory: empty here, nothing is watched
        self.first_nonfinite = None  # the builder's first NaN/Inf fact: none here (no op reports one)
        self._ids = itertools.count()

    def acquire(self):  # the builder's lock for facts; one thread's facts here
        pass

    def release(self):
        pass

    def _log(self, fact, **kw):
        self.facts.append((fact, kw))

    def of(self, name):
        return [kw for n, kw in self.facts if n == name]

    def engine(self, name, version=None, devices=(), memory=None, accelerator=None):
        self._log("engine", name=name, version=version)

    def unseen(self, kind, what, **kw):
        self._log("unseen", kind=kind, what=what, **kw)

    def device(self, name, device):
        self._log("device", device=device)

    def variable(self, key, origin, shape, dtype, nbytes, requires_grad, location, **kw):
        self.live_variables[key] = rec = Rec(next(self._ids), origin, kw.get("handle"), kw.get("name"))
        self._log("variable", key=key, origin=origin, shape=shape, dtype=dtype, nbytes=nbytes, location=location, **kw)
        return rec

    def variable_died(self, key):
        self.live_variables.pop(key, None)
        self._log("variable_died", key=key)

    def variable_handle_died(self, handle):  # the weak reference's callback: only the live record's own
        rec = self.live_variables.get(handle.key)
        if rec is not None and rec.handle is handle:
            self.variable_died(handle.key)

    def variable_state(self, key, **kw):
        self._log("variable_state", key=key, **kw)

    def name_variables(self, names):
        self._log("names", names=names)

    def parameter_names(self, names):
        self._log("parameter_names", names=names)

    def op(self, key, op, class_name, custom, edges, input_variables, outputs, saved, location, meta=None,
           nonfinite=False, lasti=-1, handle=None):
        kw = {"lasti": lasti, "handle": handle}
        outputs, saved = _named(outputs, saved)
        self.live_nodes[key] = Rec(key, handle=handle)
        for o in outputs:
            self.live_variables[o.key] = Rec(next(self._ids), "op", o.handle)
        self._log("op", key=key, op=op, class_name=class_name, custom=custom, edges=edges,
                  input_variables=input_variables, outputs=outputs, saved=saved, location=location, **kw)

    def unrecorded_op(self, op, input_variables, outputs, location, **kw):
        outputs, _ = _named(outputs, ())
        for o in outputs:
            self.live_variables[o.key] = Rec(next(self._ids), "op", o.handle)
        self._log("unrecorded_op", op=op, outputs=outputs, location=location)

    def external_node(self, key, op, class_name, custom, **kw):
        self.live_nodes[key] = Rec(key, handle=kw.get("handle"))
        self._log("external_node", key=key, op=op, **kw)

    def node_inputs(self, key, edges, input_shapes=()):
        self._log("node_inputs", key=key, edges=edges)

    def node_saved(self, key, saved, freed=False):
        _, saved = _named((), saved)
        self._log("node_saved", key=key, saved=saved, freed=freed)

    def node_died(self, key):
        self.live_nodes.pop(key, None)
        self._log("node_died", key=key)

    def node_handle_died(self, handle):
        rec = self.live_nodes.get(handle.key)
        if rec is not None and rec.handle is handle:
            self.node_died(handle.key)

    def module_enter(self, key, path, class_name):
        self._log("module_enter", path=path, class_name=class_name)

    def module_exit(self, key):
        self._log("module_exit", key=key)

    def inplace(self, variable, old_version, new_version, counter, location, **kw):
        self._log("inplace", variable=variable, old_version=old_version, new_version=new_version, counter=counter,
                  location=location, **kw)

    def parameter_update(self, variable, old_version, new_version, counter, location, optimizer):
        self._log("parameter_update", variable=variable, optimizer=optimizer, location=location)

    def cut(self, source, how, location, result=None):
        self._log("cut", source=source, how=how, location=location, result=result)
        return self.live_variables[source].id

    def wrapped(self, key, source_id):
        self._log("wrapped", key=key, source_id=source_id)

    def hook(self, variable, event, location, **kw):
        self._log("hook", variable=variable, event=event, location=location, **kw)

    def grad_read(self, variable, location, **kw):
        self._log("grad_read", variable=variable, location=location, **kw)

    def grad_write(self, variable, location, **kw):
        self._log("grad_write", variable=variable, location=location, **kw)

    def optimizer(self, event, location, optimizer, parameters):
        self._log("optimizer", event=event, location=location, optimizer=optimizer, parameters=parameters)

    def backward_begin(self, roots, root_nodes, location, **kw):
        self._log("backward_begin", roots=roots, root_nodes=root_nodes, location=location, **kw)

    def backward_step(self, node, norm, nonfinite=False):
        self._log("backward_step", node=node, norm=norm, nonfinite=nonfinite)

    def accumulate(self, variable, norm, nonfinite=False, grad=None):
        self._log("accumulate", variable=variable, norm=norm, grad=grad)

    def buffers_freed(self, node):
        self._log("buffers_freed", node=node)

    def wants_backward_check(self, function_key, signature):
        self._log("wants_backward_check", function=function_key)
        return False  # the check itself is tested with the real builder

    def backward_check(self, node_key, class_name, signature, result, location, backward_location):
        self._log("backward_check", node=node_key, result=result)

    def existing_output(self, variable, node):
        self._log("existing_output", variable=variable, node=node)

    def backward_end(self, error=None):
        self._log("backward_end", error=error)


def _named(outputs, saved):
    """The facts as namedtuples, for tests to read by field name (adapters may hand the builder plain tuples)."""
    return [OutputFact(*o) for o in outputs], [SavedFact(*f) for f in saved]
