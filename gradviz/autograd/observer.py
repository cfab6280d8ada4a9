"""The one way into the engine for anything that watches it (the tracer, profilers, tests).

The engine calls the methods of every attached ``Observer`` at a few fixed points and knows nothing else about
them. With no observer attached, each of those points costs one context-variable read and a falsy check. An
exception a callback raises goes to that observer's ``callback_failed`` (caught where the engine made the call, so
an observer needs no wrapper of its own, and no Python frame, to keep its errors out of the user's code).
Observers must not keep strong references to engine objects they do not own (use weak references or
copies), or they would keep graphs alive and change the very memory figures they report; nor the gradient arrays
backward shows them: a leaf may keep such an array as its ``.grad`` and update it in place.

gradviz's own code that reads or writes ``.grad``, cuts values or registers hooks on the user's behalf
(optimizers, ``zero_grad``, gradcheck) runs inside ``quiet()``: observers ask ``is_quiet()`` to tell those calls
from the user's, instead of inspecting the Python stack.
"""

import contextvars

_observers = contextvars.ContextVar("gradviz_observers", default=())
_quiet = contextvars.ContextVar("gradviz_quiet", default=None)


class Observer:
    """Base class: every callback is a no-op; override the ones you need."""

    def callback_failed(self, callback, exc):
        """Callback ``callback`` (its name, ``"on_function"``…) raised ``exc``, an ``Exception``: the engine hands
        it here, where the call was made, instead of letting it leave the callback. This default raises it on
        into the engine's caller; an observer that must never disturb the program it watches (the tracer's)
        records it and returns, and the engine goes on as if the callback had returned."""
        raise exc

    def on_variable(self, variable, origin):
        """A Variable not produced by an op was created: ``origin`` is one of ``"new"`` (constructor,
        ``tensor``), ``"factory"`` (zeros, randn…), ``"data"`` (``.data``), ``"detach"``, ``"parameter"``,
        ``"grad"`` (a ``.grad`` produced by backward)."""

    def on_function(self, node, inputs, outputs):
        """An op ran forward. ``node`` is the op's context; ``node.recorded`` says whether it became a graph
        node (it did not under ``no_grad``, with volatile inputs, or when no input requires grad).
        ``inputs`` are the positional arguments as passed (Variables and constants), ``outputs`` a tuple."""

    def on_inplace(self, variable, node, old_version, new_version):
        """An in-place op changed ``variable``'s storage; ``node`` is its graph node, or None if unrecorded.
        Called after the data changed and the version counter moved."""

    def on_parameter_update(self, optimizer, parameter, old_version, new_version):
        """An optimizer's ``step()`` wrote into ``parameter`` (once per parameter per step, after the data
        changed and its version counter moved); ``optimizer`` is None when the update did not come from
        ``Optimizer.step``."""

    def on_backward_begin(self, roots, grad_roots, retain_graph, inputs):
        """``backward``/``autograd.grad`` starts from ``roots``; ``inputs`` is None for ``backward``."""

    def on_backward_step(self, node, grad_outputs, grad_inputs):
        """One graph node ran backward: ``grad_outputs`` are the gradients it received (numpy arrays or None),
        ``grad_inputs`` the ones it returned, aligned with its positional inputs."""

    def on_backward_end(self, roots, error):
        """Backward finished; ``error`` is the exception it raised, or None."""

    def on_buffers_freed(self, node):
        """Backward released ``node``'s saved tensors (no ``retain_graph``)."""

    def on_grad_read(self, variable, grad):
        """User code read ``variable.grad``; ``grad`` is what it got (None or a Variable)."""

    def on_grad_write(self, variable, grad):
        """``variable.grad`` was assigned by user code (not by backward)."""

    def on_accumulate(self, variable, grad):
        """Backward accumulated ``grad`` (a numpy array) into the leaf ``variable``."""

    def on_hook(self, variable, hook, event, grad=None, result=None):
        """A tensor hook was registered (``event="register"``), called (``"call"``) or removed (``"remove"``);
        ``retain_grad`` counts as a hook with ``hook=None``."""

    def on_detach(self, source, result, how):
        """A value left the graph: ``how`` is ``"detach"``, ``"data"``, ``"numpy"``, ``"item"`` or
        ``"tolist"``; ``result`` is the new Variable or the plain value handed out."""

    def on_module_call(self, module, phase, inputs=None, output=None):
        """An ``nn.Module`` call began (``phase="enter"``) or ended (``"exit"``)."""

    def on_optimizer(self, optimizer, event):
        """An optimizer ran ``"step"`` or ``"zero_grad"``; ``optimizer`` can also be an ``nn.Module`` whose
        ``zero_grad()`` ran (``event="zero_grad"``)."""


class quiet:
    """``with quiet(owner):`` around gradviz's own code: the ``.grad`` reads and writes, cuts and hook
    registrations it makes are not the user's (``is_quiet()`` is true inside). ``owner`` says on whose behalf
    (an optimizer during its ``step``); ops still reach observers as usual. Costs two context-variable writes:
    callers enter it only when observers are attached."""

    __slots__ = ("owner", "token")

    def __init__(self, owner=True):
        self.owner = owner
        self.token = None

    def __enter__(self):
        self.token = _quiet.set(self.owner)
        return self

    def __exit__(self, *exc):
        _quiet.reset(self.token)
        return False


def is_quiet():
    """Whether the engine is running gradviz's own code (see ``quiet``)."""
    return _quiet.get() is not None


def quiet_owner():
    """On whose behalf gradviz's own code runs: what ``quiet(owner)`` was given, or None outside it."""
    return _quiet.get()


def active():
    """The attached observers, as a tuple (empty when nobody watches)."""
    return _observers.get()


def attach(observer):
    """Attach ``observer`` in the current context; returns it. Use ``detach`` (or ``observing``) to undo."""
    current = _observers.get()
    if observer not in current:
        _observers.set(current + (observer,))
    return observer


def detach(observer):
    """Detach ``observer`` from the current context (a no-op if it is not attached)."""
    _observers.set(tuple(o for o in _observers.get() if o is not observer))


class observing:
    """``with observing(obs):`` attaches ``obs`` for the block."""

    def __init__(self, observer):
        self.observer = observer

    def __enter__(self):
        return attach(self.observer)

    def __exit__(self, *exc):
        detach(self.observer)
        return False
