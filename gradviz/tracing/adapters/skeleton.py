"""The event flow both adapters share: which builder facts and which watches an event reaches, in what order.

Each adapter reads its own engine (torch's hooks and patched calls, gradviz's ``Observer`` callbacks) and hands
what it read, as keys, locations and plain values, to these methods; the order of the facts and the watches
(light iterations, train/eval modes, optimizer order) is written once here. A mixin: the adapter provides
``builder``, ``light_steps``, ``training_watch``, ``optimizer_watch`` and ``value_type`` (its engine's tensor
class, for names read out of the user's frames).
"""

from ..frames import _CO_OPTIMIZED, _locals, names_in_frame


def hook_facts(hook):
    """``(name, location)`` of a user's tensor hook as the ``hook`` fact gives them (None for ``retain_grad``)."""
    if hook is None:
        return None, None
    code = getattr(hook, "__code__", None)
    return (getattr(hook, "__qualname__", type(hook).__name__),
            None if code is None else {"file": code.co_filename, "line": code.co_firstlineno})


class EventSkeleton:
    """Builder facts for the events every engine has: a backward call's start and end, an optimizer's event,
    a hook, and the names the user's frame gives live values."""

    value_type = None  # the engine's tensor class (set by the adapter)

    def backward_started(self, roots, keys, root_nodes, location, *, kind, retain_graph, gradient_none,
                         root_fn=None, loss=None):
        """A backward (``kind`` "backward") or ``autograd.grad`` ("grad") call begins at ``location`` on
        ``roots`` (the engine's values; ``keys`` and ``root_nodes`` their keys and their nodes' keys). ``root_fn``
        and ``loss`` are the single root's node and float value, for the optimizer watch's per-step count."""
        if self.light_steps.enabled:
            self.light_steps.note_roots(roots)
        self.training_watch.backward()
        if kind == "backward":  # how many backward calls per step, on what loss (accumulation-not-scaled)
            self.optimizer_watch.backward(location, root_fn, loss)
        self.builder.backward_begin(keys, root_nodes, location, retain_graph=retain_graph, kind=kind,
                                    gradient_none=gradient_none)

    def backward_finished(self, info):
        """The backward call in progress ended (``info``: its error, or None)."""
        self.builder.backward_end(info)

    def iteration_backward(self):
        """A backward ended without error outside an optimizer's step: in a loop with no optimizer that ends
        the iteration (the schedule's tick); with one, the step does."""
        light = self.light_steps
        if light.enabled and not light.has_optimizer:
            light.backward_ended()

    def optimizer_event(self, event, location, owner, params):
        """``owner`` (an optimizer, or a module's ``zero_grad``) ran ``event`` on the parameters keyed ``params``."""
        self.builder.optimizer(event, location, type(owner).__name__, params)

    def iteration_step(self):
        """An optimizer's step ended, outside any other step: the schedule decides whether the next iteration
        is full or light."""
        if self.light_steps.enabled:
            self.light_steps.step_ended()

    def hook_fact(self, key, event, location, hook, retain_grad=False):
        """A hook on value ``key`` was registered (``event`` "register") or called ("call")."""
        name, where = hook_facts(hook)
        self.builder.hook(key, event, location, retain_grad=retain_grad, hook_name=name, hook_location=where)

    # ----- names ------------------------------------------------------------------------------------------------
    def _name_from_frame(self, frame, quick=False):
        """Give unnamed live values the name the user's frame binds them to (cheap: one pass over a dict).

        ``quick`` (at every backward call): when the frame's globals have as many entries as at the last full
        pass, only the names that held values then are looked at again — a loop rebinding ``loss`` is still
        seen, without scanning the whole module every iteration; stopping the trace does a full pass."""
        if frame is None:
            return
        kind = self.value_type
        scope = frame.f_globals
        if quick:
            known = self._global_names.get(id(scope))
            if known is not None and known[0] == len(scope):
                found = {}
                for key in known[1]:
                    value = scope.get(key)
                    if isinstance(value, kind):
                        found.setdefault(id(value), key)
                if frame.f_code.co_flags & _CO_OPTIMIZED:  # a function: its locals too
                    for key, value in _locals(frame):
                        if isinstance(value, kind) and not key.startswith("__"):
                            found.setdefault(id(value), key)
                self.builder.name_variables(found)
                return
        found = names_in_frame(frame, kind)
        self._global_names[id(scope)] = (len(scope), tuple(
            key for key, value in scope.items() if isinstance(value, kind) and not key.startswith("__")))
        self.builder.name_variables(found)

    def name_from_frame(self, frame):
        self._name_from_frame(frame)
