"""DistributedDataParallel, seen by the torch adapter: the only gradviz code that touches DDP's internals.

While a trace is attached, ``DistributedDataParallel.forward`` is wrapped (and restored when it stops). At the
first call of each DDP module we note its path, ``find_unused_parameters``, ``static_graph`` and its parameters'
names, and put two kinds of hooks on what it wraps (taken off at the end): a forward pre-hook on each submodule
that holds parameters (where the user's code calls it: the line a branch skips when it does not), and a
post-accumulate-grad hook on each parameter (which parameters this rank's backward reached). Per forward we note
whether it all-reduces (grad mode on and not under ``no_sync()``: DDP decides that at forward) and, once its
backward has run, which wrapped parameters got no gradient. Per optimizer step (a global step pre-hook) we note
the micro-steps since the last step and, on a fully traced iteration only (the schedule's first and sampled
iterations, the same on every rank: tracing/schedule.py), a fingerprint of every stepped gradient, after the
all-reduce: its norm and its sum, a pair of numbers per parameter rather than the tensor. PyTorch's "Expected to
have finished reduction in the prior iteration" error, raised at a DDP forward, is noted with the parameters it
names.

Everything is reported as ``TraceBuilder.ddp(kind, fields)`` facts; the rules that compare ranks read the
document's ``ddp`` section only.
"""

import re
import weakref

from ...frames import location_at
from .frames import user_frame

REDUCTION_ERROR = "Expected to have finished reduction in the prior iteration"
_INDICES = re.compile(r"Parameter indices which did not receive grad for rank (\d+):((?:\s+\d+)+)")
_NAMES = re.compile(r"Parameters which did not receive grad for rank (\d+):\s*([^\n]+)")

_wrapped = []  # (DistributedDataParallel, its own forward) while a trace is attached


def _here():
    frame = user_frame(0)
    return None if frame is None else location_at(frame.f_code, frame.f_lineno)


def install(adapter):
    """Wrap DDP's forward and hook optimizer steps for ``adapter`` (called from ``torch_patches.install``)."""
    torch = adapter.torch
    if not torch.distributed.is_available():
        return
    from torch.nn.parallel import DistributedDataParallel
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    uninstall(adapter)
    watch = adapter.ddp = DDPWatch(adapter)
    own = DistributedDataParallel.__dict__["forward"]

    def forward(self, *inputs, **kwargs):
        return watch.forward(own, self, inputs, kwargs)

    forward.__wrapped__ = own
    DistributedDataParallel.forward = forward
    _wrapped.append((DistributedDataParallel, own))
    watch.handles.append(register_optimizer_step_pre_hook(watch.step))
    _wrap_all_reduce(torch, watch)


def _wrap_all_reduce(torch, watch):
    """Every tensor a process group all-reduces from Python is noted: a gradient all-reduce written by hand (no
    DDP) is compared across ranks like DDP's, and the parameters it never reduced are named at its line.

    The process group's own methods are wrapped (``allreduce``, ``allreduce_coalesced``), which
    ``dist.all_reduce`` and ``dist.all_reduce_coalesced`` look up at each call: a name imported from
    ``torch.distributed`` before the trace started is seen too. DDP's reducer calls the group from C++, so its
    own reductions never come here. A flat buffer made by ``torch._utils._flatten_dense_tensors`` (a bucket of
    gradients reduced at once) stands for the tensors it was made from: the C function that helper looks up is
    wrapped, and a reduced buffer marks each of them reduced."""
    group = getattr(torch.distributed, "ProcessGroup", None)
    for name in ("allreduce", "allreduce_coalesced"):
        own = getattr(group, "__dict__", {}).get(name)
        if own is not None:
            _wrap(group, name, _noting(own, watch.reduced_all))
    nn = getattr(torch._C, "_nn", None)
    own = getattr(nn, "flatten_dense_tensors", None)
    if own is not None:
        def flatten(tensors, *args, **kwargs):
            flat = own(tensors, *args, **kwargs)
            watch.flattened(flat, tensors)
            return flat

        _wrap(nn, "flatten_dense_tensors", flatten)


def _noting(own, note):
    def reduce(self, tensors, *args, **kwargs):
        note(tensors)
        return own(self, tensors, *args, **kwargs)

    return reduce


def _wrap(owner, name, replacement):
    replacement.__wrapped__ = owner.__dict__[name]
    _wrapped.append((owner, owner.__dict__[name], name))
    setattr(owner, name, replacement)


def uninstall(adapter):
    while _wrapped:
        owner, own, *name = _wrapped.pop()
        setattr(owner, name[0] if name else "forward", own)
    watch = getattr(adapter, "ddp", None)
    if watch is not None:
        adapter.ddp = None
        watch.close()


class _Wrapped:
    """One DDP module: its path, its parameters (weakly), and the forward whose backward is awaited."""

    def __init__(self, ddp, path):
        self.ref = weakref.ref(ddp)
        self.path = path
        self.names = []  # parameter names, in DDP's order (named_parameters of the wrapped module, trainable)
        self.owners = {}  # parameter name -> path of the submodule holding it
        self.called_once = set()  # submodule paths whose call site was reported
        self.forwards = 0
        self.current = None  # the latest _Forward, until its backward is accounted for


class _Forward:
    __slots__ = ("wrapped", "index", "synced", "location", "called", "got")

    def __init__(self, wrapped, index, synced, location):
        self.wrapped = wrapped
        self.index = index
        self.synced = synced
        self.location = location
        self.called = set()  # submodule paths called in this forward
        self.got = set()  # indices of parameters a backward accumulated into


class DDPWatch:
    def __init__(self, adapter):
        self.adapter = adapter
        self.builder = adapter.builder
        self.modules = {}  # id(DDP module) -> _Wrapped
        self.calling = None  # the _Forward whose DDP forward is running
        self.since_step = []  # forwards whose backward ran since the last optimizer step
        self.step_count = 0
        self.handles = []
        self.by_hand = {}  # data_ptr of each tensor all-reduced by hand since the last step -> the call's location
        self.by_hand_seen = False  # some all_reduce outside DDP reduced a tensor: steps are fingerprinted
        self.flat = {}  # data_ptr of each flat buffer made since the last step -> its tensors' data_ptrs

    # ----- DDP's forward ------------------------------------------------------------------------------------
    def forward(self, own, ddp, inputs, kwargs):
        adapter = self.adapter
        if not adapter.observing() or adapter.tls.quiet:
            return own(ddp, *inputs, **kwargs)
        record = None
        try:
            with adapter.lock:
                record = self._begin(ddp)
        except Exception as exc:
            adapter.internal_error("ddp", exc)
        outer, self.calling = self.calling, record
        try:
            return own(ddp, *inputs, **kwargs)
        except RuntimeError as exc:
            if record is not None and REDUCTION_ERROR in str(exc):
                self._reduction_error(record, str(exc))
            raise
        finally:
            self.calling = outer

    def _begin(self, ddp):
        torch = self.adapter.torch
        wrapped = self.modules.get(id(ddp))
        if wrapped is None or wrapped.ref() is not ddp:
            wrapped = self.modules[id(ddp)] = self._wrap(ddp)
        self._finish(wrapped)
        synced = bool(torch.is_grad_enabled() and getattr(ddp, "require_backward_grad_sync", True))
        record = wrapped.current = _Forward(wrapped, wrapped.forwards, synced, _here())
        wrapped.forwards += 1
        return record

    def _wrap(self, ddp):
        adapter, torch = self.adapter, self.adapter.torch
        if not self.modules:
            self._process(torch)
        calls = adapter.tls.calls
        path = calls[-1][1] if calls and calls[-1][0] is ddp else type(ddp).__name__
        wrapped = _Wrapped(ddp, path)
        inner = ddp.module
        ignored = set(getattr(ddp, "parameters_to_ignore", ()) or ())
        seen = set()
        for sub, module in inner.named_modules():
            sub_path = f"{path}.module.{sub}" if sub else f"{path}.module"
            holds = False
            for pname, p in module.named_parameters(recurse=False):
                full = f"{sub}.{pname}" if sub else pname
                if id(p) in seen or not p.requires_grad or full in ignored:
                    continue
                seen.add(id(p))
                holds = True
                name = adapter.names.parameter_path(p) or f"{path}.module.{full}"
                index = len(wrapped.names)
                wrapped.names.append(name)
                wrapped.owners[name] = sub_path
                self.handles.append(p.register_post_accumulate_grad_hook(self._accumulated(wrapped, index)))
            if holds:
                self.handles.append(module.register_forward_pre_hook(self._called(wrapped, sub_path)))
        self.builder.ddp("module", {
            "path": path, "find_unused_parameters": bool(getattr(ddp, "find_unused_parameters", False)),
            "static_graph": bool(getattr(ddp, "static_graph", False)), "parameters": list(wrapped.names),
            "owners": dict(wrapped.owners)})
        return wrapped

    def _process(self, torch):
        dist = torch.distributed
        if dist.is_initialized():
            self.builder.ddp("process", {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
                                         "backend": str(dist.get_backend())})

    def _accumulated(self, wrapped, index):
        def hook(param):
            record = wrapped.current
            if record is not None:
                record.got.add(index)
        return hook

    def _called(self, wrapped, sub_path):
        def hook(module, inputs):
            record = self.calling
            if record is None or record.wrapped is not wrapped:
                return
            record.called.add(sub_path)
            if sub_path not in wrapped.called_once:
                wrapped.called_once.add(sub_path)
                try:
                    with self.adapter.lock:
                        self.builder.ddp("call_site", {"module": wrapped.path, "submodule": sub_path,
                                                       "location": _here()})
                except Exception as exc:
                    self.adapter.internal_error("ddp", exc)
        return hook

    def _finish(self, wrapped):
        """The forward before this one: report it, with the parameters its backward did not reach."""
        record = wrapped.current
        if record is None:
            return
        wrapped.current = None
        ran = bool(record.got)  # no parameter got a gradient: taken as no backward (an evaluation forward)
        unused = [n for i, n in enumerate(wrapped.names) if i not in record.got] if ran else []
        skipped = sorted({wrapped.owners[n] for n in unused} - record.called)
        self.builder.ddp("forward", {"module": wrapped.path, "forward": record.index, "synced": record.synced,
                                     "location": record.location, "backward": ran, "unused": unused,
                                     "skipped": skipped})
        if ran:
            self.since_step.append(record)

    def _reduction_error(self, record, message):
        try:
            with self.adapter.lock:
                names = record.wrapped.names
                reported = {}
                for rank, indices in _INDICES.findall(message):
                    reported[rank] = [names[int(i)] if int(i) < len(names) else f"#{i}" for i in indices.split()]
                for rank, listed in _NAMES.findall(message):
                    reported[rank] = [f"{record.wrapped.path}.module.{n.strip()}" for n in listed.split(",")
                                      if n.strip()]
                rank = next(iter(reported), None)
                self.builder.ddp("error", {
                    "module": record.wrapped.path, "forward": record.index, "location": record.location,
                    "message": message.split("\n")[0], "rank": None if rank is None else int(rank),
                    "parameters": reported.get(rank, [])})
        except Exception as exc:
            self.adapter.internal_error("ddp", exc)

    # ----- gradients all-reduced by hand ------------------------------------------------------------------------
    def reduced_all(self, tensors):
        """A process group's all-reduce of ``tensors`` (one tensor or a list): each is noted as reduced, and the
        tensors a reduced flat buffer was made from with it."""
        if self.calling is not None or not self.adapter.observing() or self.adapter.tls.quiet:
            return
        try:
            Tensor = self.adapter.torch.Tensor
            tensors = [tensors] if isinstance(tensors, Tensor) else [t for t in tensors if isinstance(t, Tensor)]
            if not tensors:
                return
            with self.adapter.lock:
                if not self.by_hand_seen and not self.modules:
                    self._process(self.adapter.torch)
                self.by_hand_seen = True
                where = _here()
                for tensor in tensors:
                    ptr = tensor.data_ptr()
                    for reduced in (ptr, *self.flat.get(ptr, ())):
                        self.by_hand.setdefault(reduced, where)
        except Exception as exc:
            self.adapter.internal_error("ddp", exc)

    def flattened(self, flat, tensors):
        """``flat`` is a bucket made of ``tensors``: reducing it reduces them (until the next optimizer step)."""
        if self.calling is not None or not self.adapter.observing() or self.adapter.tls.quiet:
            return
        try:
            with self.adapter.lock:
                self.flat[flat.data_ptr()] = [t.data_ptr() for t in tensors]
        except Exception as exc:
            self.adapter.internal_error("ddp", exc)

    def _by_hand(self, optimizer):
        """``(reduced names, not reduced names, the first all_reduce's location)`` of the step's gradients."""
        path = self.adapter.names.parameter_path
        reduced, missed, where = [], [], None
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group.get("params", ())):
                if p.grad is None:
                    continue
                name = path(p) or f"{type(optimizer).__name__}[{g}][{i}]"
                location = self.by_hand.get(p.grad.data_ptr())
                (reduced if location is not None else missed).append(name)
                where = where or location
        self.by_hand, self.flat = {}, {}
        return reduced, missed, where

    # ----- optimizer steps ------------------------------------------------------------------------------------
    def step(self, optimizer, args, kwargs):
        if not (self.modules or self.by_hand_seen) or not self.adapter.observing():
            return
        try:
            with self.adapter.lock:
                self._step(optimizer)
        except Exception as exc:
            self.adapter.internal_error("ddp", exc)

    def _step(self, optimizer):
        for wrapped in self.modules.values():
            self._finish(wrapped)
        micro = {}
        for record in self.since_step:
            entry = micro.setdefault(record.wrapped.path, {"module": record.wrapped.path, "backwards": 0,
                                                           "synced": 0, "location": record.location})
            entry["backwards"] += 1
            entry["synced"] += record.synced
        self.since_step = []
        n = self.step_count
        # two reductions per gradient (about 0.05 ms a step for an MLP of 235k parameters): on full iterations only
        light = getattr(self.adapter, "light_steps", None)
        sampled = light is None or not light.on
        record = {"step": n, "location": _here(), "optimizer": type(optimizer).__name__,
                  "micro": list(micro.values()), "gradients": self._fingerprints(optimizer) if sampled else {}}
        if self.by_hand_seen and not self.modules:  # data parallel by hand: which gradients this step reduced
            reduced, missed, where = self._by_hand(optimizer)
            record.update(by_hand={"reduced": reduced, "not_reduced": missed}, reduce_location=where)
        self.builder.ddp("step", record)
        self.step_count += 1

    def _fingerprints(self, optimizer):
        """``{parameter name: [norm, sum]}`` of every gradient the step is given (computed in the gradient's dtype:
        the same gradient on two ranks gives the same bits, and the rules compare with a tolerance anyway)."""
        torch = self.adapter.torch
        path = self.adapter.names.parameter_path
        names, grads = [], []
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group.get("params", ())):
                grad = p.grad
                if grad is None or grad.is_sparse or grad.is_complex():  # (no norm and sum of those as numbers)
                    continue
                names.append(path(p) or f"{type(optimizer).__name__}[{g}][{i}]")
                grads.append(grad)
        if not grads:
            return {}
        with torch.no_grad():
            values = [*torch._foreach_norm(grads), *(t.sum() for t in grads)]
            if len({t.device for t in grads}) > 1:
                values = [v.cpu() for v in values]
            flat = torch.stack(values).tolist()  # one read-back (one device sync on a GPU)
        n = len(grads)
        return {name: [flat[k], flat[n + k]] for k, name in enumerate(names)}

    def close(self):
        try:
            with self.adapter.lock:
                for wrapped in self.modules.values():
                    self._finish(wrapped)
        except Exception as exc:
            self.adapter.internal_error("ddp", exc)
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.modules = {}
