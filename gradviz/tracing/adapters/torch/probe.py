"""The backward check's probes on real PyTorch: copies of the inputs (detached, on their device), the Function
applied to them, ``torch.autograd.grad`` for the vector-Jacobian product, output hidden and the random state
(torch's CPU and CUDA generators, numpy's) put back before every call. The adapter passes ``suspend``, a
context manager that stops its own observation (its function mode, hooks) while the probes run."""

import contextlib
import io
import warnings

import numpy as np

from ...backward_check import CheckResult, ProbeEngine, check_backward, describe_tensor, signature_of


class TorchProbe(ProbeEngine):
    def __init__(self, torch):
        self.torch = torch
        self._states = None

    def differentiable(self, args):
        t = self.torch
        return [i for i, a in enumerate(args) if isinstance(a, t.Tensor) and a.requires_grad and a.is_floating_point()]

    def array(self, value):
        return value.detach().cpu().numpy().copy()

    def forward(self, fn_class, args, kwargs, arrays, track):
        t = self.torch
        self._restore_random()
        leaves = {}
        copies = []
        for i, a in enumerate(args):
            if i in arrays:
                leaf = t.tensor(arrays[i], device=a.device, requires_grad=track)
                leaves[i] = leaf
                copies.append(leaf)
            elif isinstance(a, t.Tensor):
                copies.append(a.detach().clone())
            else:
                copies.append(a)
        with t.set_grad_enabled(track):
            out = fn_class.apply(*copies, **kwargs)
        return (tuple(out) if isinstance(out, (tuple, list)) else (out,)), leaves

    def output_arrays(self, outputs, tracked):
        t = self.torch
        arrays = []
        for o in outputs:
            ok = isinstance(o, t.Tensor) and o.is_floating_point() and (o.requires_grad or not tracked)
            arrays.append(o.detach().cpu().numpy() if ok else None)
        return arrays

    def vjp(self, outputs, leaves, cotangents):
        t = self.torch
        pairs = [(o, t.as_tensor(v, device=o.device)) for o, v in zip(outputs, cotangents) if v is not None]
        order = list(leaves)
        grads = t.autograd.grad([o for o, _ in pairs], [leaves[p] for p in order],
                                grad_outputs=[v for _, v in pairs], allow_unused=True)
        return {p: None if g is None else g.detach().cpu().numpy() for p, g in zip(order, grads)}

    @contextlib.contextmanager
    def quiet(self, suspend=None):
        t = self.torch
        cuda = t.cuda.is_available() and t.cuda.is_initialized()
        self._states = (t.get_rng_state(), t.cuda.get_rng_state_all() if cuda else None, np.random.get_state())
        try:
            with contextlib.ExitStack() as stack:
                if suspend is not None:
                    stack.enter_context(suspend())
                stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
                stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
                stack.enter_context(warnings.catch_warnings())
                warnings.simplefilter("ignore")
                yield self
        finally:
            self._restore_random()
            self._states = None

    def _restore_random(self):
        if self._states is not None:
            cpu, cuda, numpy_state = self._states
            self.torch.set_rng_state(cpu)
            if cuda is not None:
                self.torch.cuda.set_rng_state_all(cuda)
            np.random.set_state(numpy_state)


def signature(torch, args, kwargs):
    return signature_of(args, kwargs, lambda a: isinstance(a, torch.Tensor),
                        lambda v: describe_tensor(str(v.dtype).replace("torch.", ""), v.shape, v.requires_grad))


def run_check(torch, fn_class, args, kwargs, suspend=None):
    """Check ``fn_class``'s backward at ``args``; a probe that raises is a skip, never the user's error."""
    probe = TorchProbe(torch)
    try:
        with probe.quiet(suspend):
            return check_backward(probe, fn_class, args, kwargs)
    except Exception as exc:  # the user's forward/backward on copies: their failure is reported, not raised
        first = str(exc).split("\n")[0]
        return CheckResult("skipped", f"the probe raised {type(exc).__name__}: {first}")
