"""The backward check's probes on gradviz's engine: copies of the inputs, the Function applied to them with no
observer attached, its output hidden, and gradviz's and numpy's random state put back before every call."""

import contextlib
import io
import warnings

import numpy as np

from ....autograd import grad_mode, observer
from ....autograd.engine import grad as _grad
from ....autograd.variable import Variable
from ....factories import _rng
from ...backward_check import CheckResult, ProbeEngine, check_backward, describe_tensor, signature_of


class GradvizProbe(ProbeEngine):
    def __init__(self):
        self._states = None

    def differentiable(self, args):
        return [i for i, a in enumerate(args)
                if isinstance(a, Variable) and a._requires_grad and a._data.dtype.kind == "f"]

    def array(self, value):
        return np.array(value._data, copy=True)

    def forward(self, fn_class, args, kwargs, arrays, track):
        self._restore_random()
        leaves = {}
        copies = []
        for i, a in enumerate(args):
            if i in arrays:
                leaf = Variable(np.array(arrays[i], copy=True), requires_grad=track)
                leaves[i] = leaf
                copies.append(leaf)
            elif isinstance(a, Variable):
                copies.append(Variable(np.array(a._data, copy=True)))
            else:
                copies.append(a)
        with grad_mode.set_grad_enabled(track):
            out = fn_class.apply(*copies, **kwargs)
        return (tuple(out) if isinstance(out, (tuple, list)) else (out,)), leaves

    def output_arrays(self, outputs, tracked):
        arrays = []
        for o in outputs:
            ok = isinstance(o, Variable) and o._data.dtype.kind == "f" and (o._requires_grad or not tracked)
            arrays.append(np.asarray(o._data) if ok else None)
        return arrays

    def vjp(self, outputs, leaves, cotangents):
        roots = [o for o, v in zip(outputs, cotangents) if v is not None]
        seeds = [Variable(v) for v in cotangents if v is not None]
        order = list(leaves)
        grads = _grad(roots, [leaves[p] for p in order], grad_outputs=seeds, allow_unused=True)
        return {p: None if g is None else g._data for p, g in zip(order, grads)}

    @contextlib.contextmanager
    def quiet(self):
        """No observer sees the probes, nothing they print reaches the user, and the random streams end where
        they started (each probe starts from that same state, so a Function drawing random numbers sees the
        same ones every time)."""
        token = observer._observers.set(())
        self._states = (_rng().bit_generator.state, np.random.get_state())
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                    warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                yield self
        finally:
            self._restore_random()
            self._states = None
            observer._observers.reset(token)

    def _restore_random(self):
        if self._states is not None:
            _rng().bit_generator.state = self._states[0]
            np.random.set_state(self._states[1])


def describe(v):
    return describe_tensor(v._data.dtype.name, v._data.shape, v._requires_grad)


def signature(args, kwargs):
    return signature_of(args, kwargs, lambda a: isinstance(a, Variable), describe)


def run_check(fn_class, args, kwargs):
    """Check ``fn_class``'s backward at ``args``; a probe that raises is a skip, never the user's error."""
    probe = GradvizProbe()
    try:
        with probe.quiet():
            return check_backward(probe, fn_class, args, kwargs)
    except Exception as exc:  # the user's forward/backward on copies: their failure is reported, not raised
        first = str(exc).split("\n")[0]
        return CheckResult("skipped", f"the probe raised {type(exc).__name__}: {first}")
