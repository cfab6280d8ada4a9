"""How the torch adapter gets into PyTorch, and out again: the function mode, global module and optimizer
hooks, and the few functions the mode cannot see, wrapped while a trace is attached and restored after.

- The mode is per thread. The thread that attaches gets one; a thread started while attached gets one for its
  run (``Thread._bootstrap_inner`` wrapped); it is always popped again, even from under modes pushed after it:
  a mode left on a thread's stack at exit aborts the interpreter.
- ``Function.apply`` (custom Functions, compiled regions) bypasses the mode: wrapped, it reports the call.
  A torch Function's own forward (a compiled region's) runs quiet: its ops are not the user's.
- ``Optimizer.zero_grad`` / ``Module.zero_grad``: wrapped to report the call.
- ``_HookMixin._register_hook``, which every ``Node.register_prehook`` / ``register_hook`` calls: our own node
  hooks (one per node built) are added without the ``RemovableHandle`` torch makes for each (a weak reference,
  a class-wide counter: several microseconds a node); everyone else's hooks go through the original.
- In a forked child (DataLoader workers) and while dynamo compiles, everything steps aside.
- Inside an optimizer step or ``zero_grad`` (torch's own code, reported as one fact at its end) the mode is taken
  off the thread's stack when it is on top (``step_aside``): otherwise each of the hundred-odd ``p.grad`` reads of
  an SGD step would come through the mode just to be let through.
"""

import atexit
import os
import threading
import warnings

from . import ddp as torch_ddp
from .compat import HookCount, apply_function, compiler_checks
from .relu_watch import relu_call, relu_functions

_forked = [False]  # set in a forked child: it records nothing
_current = [None]  # the attached TorchAdapter (the wrapped functions find it here)
_saved = []  # (owner, attribute, original) of what install() replaced


def _after_fork_in_child():
    _forked[0] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def forked():
    return _forked[0]


def install(adapter):
    import torch
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    if _current[0] is not None and _current[0] is not adapter:
        _current[0].detach()  # one torch trace at a time: the newest one watches
    _current[0] = adapter
    _forked[0] = False  # attached in a forked child: this is the child's own, fresh trace (distributed/child.py)
    adapter.handles = [register_module_forward_pre_hook(adapter.module_enter),
                       register_module_forward_hook(adapter.module_exit, always_call=True),
                       register_optimizer_step_pre_hook(adapter.step_begin),
                       register_optimizer_step_post_hook(adapter.step_end)]
    _quiet_compile_warning(adapter)
    torch_ddp.install(adapter)  # DistributedDataParallel's forward and the ranks' facts
    if not _saved:
        Function = torch.autograd.function.Function  # apply: a classmethod, or a C descriptor on torch 2.14+
        _replace(Function, "apply", classmethod(_traced_apply(apply_function(Function.__dict__["apply"]))))
        for owner in (torch.optim.Optimizer, torch.nn.Module):
            _replace(owner, "zero_grad", _traced_zero_grad(owner.__dict__["zero_grad"]))
        HookMixin = torch.autograd.function._HookMixin
        _replace(HookMixin, "_register_hook", staticmethod(_fast_register_hook(HookMixin.__dict__["_register_hook"])))
        _replace(threading.Thread, "_bootstrap_inner", _traced_thread(threading.Thread._bootstrap_inner))
        counter = getattr(adapter, "_unpack_hooked", None)
        if isinstance(counter, HookCount):  # a torch that cannot read its hook stack: pushes counted instead
            C = torch._C._autograd
            push, pop = counter.wrap(C._push_saved_tensors_default_hooks, C._pop_saved_tensors_default_hooks)
            _replace(C, "_push_saved_tensors_default_hooks", push)
            _replace(C, "_pop_saved_tensors_default_hooks", pop)
        Variable = torch.autograd.variable.Variable  # the legacy constructor, not an op the mode sees
        _replace(Variable, "__new__", staticmethod(_traced_new(torch._C._LegacyVariableBase.__new__, "Variable")))
        Parameter = torch.nn.Parameter  # made inside a module's __init__: located at the line making the module
        _replace(Parameter, "__new__", staticmethod(_traced_new(Parameter.__dict__["__new__"], "Parameter")))
        import torch.utils.checkpoint as checkpointing

        for name in ("checkpoint", "checkpoint_sequential"):
            if callable(getattr(checkpointing, name, None)):
                _replace(checkpointing, name, _noted_checkpoint(getattr(checkpointing, name)))
    adapter.rule_map_filled = _rule_map_filled()
    adapter.mode = observing_mode(adapter)
    adapter.mode_thread = threading.get_ident()
    adapter.mode.__enter__()


def uninstall(adapter):
    try:
        if threading.get_ident() == getattr(adapter, "mode_thread", None):
            remove_mode(adapter.torch, adapter.mode)
        elif adapter.mode is not None:
            # stopped from another thread: a mode lives on its own thread's stack, which only that thread can pop.
            # It passes every call through from now on, and leaves that stack at the thread's next stop() (a
            # `with` block's exit) or, for the main thread, at interpreter exit (a mode left there aborts it).
            leave_later(adapter, adapter.mode, adapter.mode_thread)
    finally:
        adapter.mode = None
        for h in getattr(adapter, "handles", ()):
            h.remove()
        adapter.handles = []
        torch_ddp.uninstall(adapter)
        _restore_compile_warning(adapter)
        if _current[0] is adapter:
            _current[0] = None
            while _saved:
                owner, name, value = _saved.pop()
                if value is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, value)
            _forget_rule_map(adapter)


def _rule_map():
    """Dynamo's cached map of torch functions to tracing rules, when dynamo is loaded (None otherwise)."""
    import sys

    rules = sys.modules.get("torch._dynamo.trace_rules")
    found = getattr(rules, "get_torch_obj_rule_map", None)
    return found if callable(getattr(found, "cache_clear", None)) else None


def _rule_map_filled():
    cached = _rule_map()
    return cached is not None and cached.cache_info().currsize > 0


def _forget_rule_map(adapter):
    """Dynamo loads on a script's first optimizer (``add_param_group``) and caches its rule map then, keyed by
    the functions it finds: ours, when the trace was attached. That cache would keep the wrappers, and through
    them the whole trace, alive to the end of the process (and hand dynamo our wrappers instead of torch's own
    functions): filled while attached, it is cleared, to be made again from the restored functions."""
    cached = _rule_map()
    if cached is not None and not getattr(adapter, "rule_map_filled", True):
        cached.cache_clear()


# torch.compile(module) warns when global module hooks exist: ours, not the user's, while attached
_COMPILE_WARNING = r"Using `torch.compile\(module\)` when there are global hooks on modules"


def _quiet_compile_warning(adapter):
    """Silence the warning torch.compile(module) gives because of our global module hooks (the user registered
    none), for as long as they are there."""
    if getattr(adapter, "compile_filter", None) is None:
        warnings.filterwarnings("ignore", message=_COMPILE_WARNING, category=UserWarning)
        adapter.compile_filter = warnings.filters[0]


def _restore_compile_warning(adapter):
    entry = getattr(adapter, "compile_filter", None)
    adapter.compile_filter = None
    if entry is not None:
        try:
            warnings.filters.remove(entry)
        except ValueError:  # a catch_warnings block of the program's already took it away
            return
        mutated = getattr(warnings, "_filters_mutated", None)  # what filterwarnings calls after a change
        if mutated is not None:
            mutated()


_MISSING = object()


def _replace(owner, name, value):
    _saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
    setattr(owner, name, value)


def special_functions(torch):
    """The calls the mode treats specially, keyed by what PyTorch passes as ``func``; and the type of the other
    property reads (``shape``, ``requires_grad``, ``grad_fn``…), which have nothing to report."""
    T = torch.Tensor
    special = {
        T.grad.__get__: lambda a, f, args, kw: a.grad_get(f, args, kw),
        T.grad.__set__: lambda a, f, args, kw: a.grad_set(f, args, kw),
        T.data.__get__: lambda a, f, args, kw: a.cut(f, args, kw, "data"),
        T.detach: lambda a, f, args, kw: a.cut(f, args, kw, "detach"),
        T.detach_: lambda a, f, args, kw: a.cut(f, args, kw, "detach"),
        T.numpy: lambda a, f, args, kw: a.cut(f, args, kw, "numpy"),
        T.__array__: lambda a, f, args, kw: a.cut(f, args, kw, "numpy"),  # np.asarray(t), as on gradviz's engine
        T.item: lambda a, f, args, kw: a.cut(f, args, kw, "item"),
        T.tolist: lambda a, f, args, kw: a.cut(f, args, kw, "tolist"),
        T.register_hook: lambda a, f, args, kw: a.hook_register(f, args, kw, False),
        T.retain_grad: lambda a, f, args, kw: a.hook_register(f, args, kw, True),
        T.backward: lambda a, f, args, kw: a.backward(f, args, kw, "method"),
        T.requires_grad_: _requires_grad_call,
        torch.autograd.backward: lambda a, f, args, kw: a.backward(f, args, kw, "backward"),
        torch.autograd.grad: lambda a, f, args, kw: a.backward(f, args, kw, "grad"),
    }
    for func in relu_functions(torch):  # dead units counted on full iterations (dead-relu)
        special[func] = relu_call
    # the profiler marks torch.optim's step makes around each step (``record_function``), before our pre-step hook
    # quiets the thread: no tensor in or out, nothing to report, so they skip the op path
    profiler = getattr(getattr(torch, "ops", None), "profiler", None)
    for name, overload in (("_record_function_enter_new", None), ("_record_function_exit", "_RecordFunction")):
        try:
            func = getattr(profiler, name)
            if overload is not None:
                func = getattr(func, overload)
        except (AttributeError, RuntimeError):  # an older torch without them
            continue
        special[func] = _call_through
    return special, type(T.grad.__get__)


def _call_through(adapter, func, args, kwargs):
    return func(*args, **kwargs)


def _requires_grad_call(adapter, func, args, kwargs):
    """``t.requires_grad_(flag)`` on a full iteration: an op as any other, and a parameter's freeze noted
    (``frozen_watch``; the light watch's wrapper notes it on light iterations)."""
    result = adapter.op(func, args, kwargs)
    frozen = getattr(adapter.training_watch, "frozen", None)
    if frozen is not None and args:
        flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
        frozen.noted(args[0], flag)
    return result


_mode_class = []


def observing_mode(adapter):
    """A fresh mode for one thread, reporting to ``adapter``."""
    if not _mode_class:
        _mode_class.append(_make_mode_class())
    return _mode_class[0](adapter)


def _make_mode_class():
    import torch
    from torch.overrides import TorchFunctionMode

    special, passthrough = special_functions(torch)
    # the compiler's check, inline (compat.compiler_checks): dynamo's flag first, the function dynamo folds to True
    # when it traces this method
    compiling, get_mode, fake = compiler_checks(torch)

    class GradvizMode(TorchFunctionMode):
        def __init__(self, adapter):
            super().__init__()
            self.adapter = adapter

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            adapter = self.adapter
            if not adapter.attached or _forked[0] or compiling() or get_mode(fake) is not None or adapter.tls.quiet \
                    or adapter.light_steps.on:
                return func(*args, **kwargs)
            handler = special.get(func)
            if handler is not None:
                return handler(adapter, func, args, kwargs)
            if type(func) is passthrough:
                return func(*args, **kwargs)
            return adapter.op(func, args, kwargs)

    return GradvizMode


_left_behind = []  # (adapter, mode, thread id): modes stopped from another thread, still on their own stack


def leave_later(adapter, mode, thread):
    if not _left_behind and thread == threading.main_thread().ident:
        atexit.register(_remove_left_behind_at_exit)
    _left_behind.append((adapter, mode, thread))


def remove_left_behind(adapter):
    """Pop the modes of ``adapter`` that were stopped from another thread and live on this thread's stack."""
    me = threading.get_ident()
    for entry in [e for e in _left_behind if e[0] is adapter and e[2] == me]:
        _left_behind.remove(entry)
        remove_mode(adapter.torch, entry[1])


def _remove_left_behind_at_exit():
    me = threading.get_ident()
    for adapter, mode, thread in list(_left_behind):
        if thread == me:
            _left_behind.remove((adapter, mode, thread))
            remove_mode(adapter.torch, mode)


def remove_mode(torch, mode):
    """Pop ``mode`` from this thread's stack, even from under modes pushed after it (put back as they were)."""
    if mode is None:
        return
    from torch.overrides import _get_current_function_mode_stack

    if mode not in _get_current_function_mode_stack():
        return
    above = []
    while True:
        top = torch._C._pop_torch_function_stack()
        if top is mode:
            break
        above.append(top)
    for m in reversed(above):
        torch._C._push_on_torch_function_stack(m)


def step_aside(adapter):
    """Take ``adapter``'s mode off this thread's stack when it is on top (torch's own code runs next); returns it,
    to be put back with ``step_back``, or None (then the thread's ``quiet`` count alone keeps it silent)."""
    C = adapter.torch._C
    n = C._len_torch_function_stack()
    if n:
        top = C._get_function_stack_at(n - 1)
        if getattr(top, "adapter", None) is adapter and _mode_class and type(top) is _mode_class[0]:
            C._pop_torch_function_stack()
            return top
    return None


def step_back(adapter, mode):
    if mode is not None and adapter.attached:
        adapter.torch._C._push_on_torch_function_stack(mode)


def _traced_apply(apply):
    from ...frames import location_at
    from .frames import user_frame

    def traced_apply(cls, *args, **kwargs):
        adapter = _current[0]
        if adapter is None or not adapter.observing() or adapter.tls.quiet:  # (quiet: gradviz's own probes)
            return apply(cls, *args, **kwargs)
        internal = (getattr(cls, "__module__", "") or "").startswith("torch")
        tls = adapter.tls
        if internal:  # a compiled region's CompiledFunction: the ops it runs are not the user's
            tls.quiet += 1
        try:
            outputs = apply(cls, *args, **kwargs)
        finally:
            if internal:
                tls.quiet -= 1
        try:
            with adapter.lock:
                frame = user_frame(0)
                location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
                adapter.on_custom_function(cls, args, outputs, location, kwargs)
                if internal and _compiled(cls):
                    adapter.builder.unseen("compiled-region", "ops inside a torch.compile region", how=_INSIDE,
                                           location=location)
        except Exception as exc:
            adapter.internal_error("Function.apply", exc)
        return outputs

    traced_apply.__wrapped__ = apply
    traced_apply.__doc__ = apply.__doc__
    return traced_apply


_INSIDE = ("run as one CompiledFunction node: the region's own ops, their lines, in-place writes and saved "
           "tensors are not traced one by one (its saved tensors are charged to that node)")


def _compiled(cls):
    """A compiled region's autograd Function (AOTAutograd's CompiledFunction), not torch's other Functions
    (checkpoint's, ...), whose ops the trace sees."""
    module = getattr(cls, "__module__", "") or ""
    return module.startswith(("torch._functorch", "torch._dynamo", "torch._inductor"))


class _OwnHookHandle:
    """What our own hook registrations return: nothing keeps it; our hooks live as long as their node."""

    __slots__ = ()

    def remove(self):
        pass


def _fast_register_hook(original):
    """``_register_hook(hooks dict, hook)``, what a node's hook registration calls: a node tag or an accumulator
    hook of ours goes into the node's hook dict keyed by itself, without a ``RemovableHandle``; other hooks take
    torch's own path, handle and all."""
    from collections import OrderedDict

    from .graph import NodeTag

    original = getattr(original, "__func__", original)
    ours = (NodeTag, AccumulatorHook)
    handle = _OwnHookHandle()

    def _register_hook(backward_hooks, hook):
        if type(hook) not in ours:
            return original(backward_hooks, hook)
        if backward_hooks is None:  # an OrderedDict, as torch makes: a user's handle holds a weak reference to it
            backward_hooks = OrderedDict()
        backward_hooks[hook] = hook
        return backward_hooks, handle

    _register_hook.__wrapped__ = original
    return _register_hook


def _traced_new(new, kind):
    """A constructor the mode does not see: ``torch.autograd.Variable(data, requires_grad=...)``, a new tensor
    sharing ``data``'s memory (the seed's ``Variable(y1.data, ...)`` that cuts a graph in two), or
    ``nn.Parameter(...)``."""
    new = getattr(new, "__func__", new)

    def __new__(cls, *args, **kwargs):
        result = new(cls, *args, **kwargs)
        adapter = _current[0]
        if adapter is not None and adapter.observing():
            try:
                with adapter.lock:
                    adapter.constructed(kind, args, result)
            except Exception as exc:
                adapter.internal_error(kind, exc)
        return result

    return __new__


_RECOMPUTED = ("the memory a checkpointed segment holds while backward recomputes it",
               "torch.utils.checkpoint saves only the segment's inputs and runs its forward again inside backward: "
               "the retained-memory figures (read from the nodes' saved tensors) do not count what that recompute "
               "holds", "run with --exact-memory: saved-tensor hooks see every tensor the recompute saves")


def _noted_checkpoint(original):
    """``torch.utils.checkpoint.checkpoint`` (or ``checkpoint_sequential``), run unchanged; its line is listed in
    ``unseen``: the memory its recompute holds is not in the saved-attribute figures (exact memory counts it)."""
    from ...frames import location_at
    from .frames import user_frame

    def checkpoint(*args, **kwargs):
        adapter = _current[0]
        if adapter is not None and adapter.exact is None and adapter.observing() and not adapter.tls.quiet:
            try:
                with adapter.lock:
                    frame = user_frame(0)
                    what, how, advice = _RECOMPUTED
                    if adapter.compat.exact is not None:  # this torch has no hooks for --exact-memory
                        advice = f"torch {adapter.compat.version} cannot measure it (no {adapter.compat.exact})"
                    adapter.builder.unseen("not-measured", what, how=how, advice=advice,
                                           location=None if frame is None else location_at(frame.f_code,
                                                                                           frame.f_lineno))
            except Exception as exc:
                adapter.internal_error("checkpoint", exc)
        return original(*args, **kwargs)

    checkpoint.__wrapped__ = original
    checkpoint.__doc__ = original.__doc__
    checkpoint.__name__ = original.__name__
    return checkpoint


def _traced_zero_grad(original):
    def zero_grad(self, *args, **kwargs):
        adapter = _current[0]
        if adapter is None:
            return original(self, *args, **kwargs)
        adapter.optimizer_watch.zero_grad(self)  # the order of backward, zero_grad, step (optimizer_watch)
        if adapter.light_steps.on:  # a reset the light step watch must know of (grad-accumulation)
            try:
                params = self.param_groups if hasattr(self, "param_groups") else None
                keys = [id(p) for g in params for p in g["params"]] if params is not None else \
                    [id(p) for p in self.parameters()]
                adapter.light_steps.summed.reset(keys)
            except Exception as exc:
                adapter.internal_error("zero_grad", exc)
            return original(self, *args, **kwargs)
        adapter.tls.quiet += 1  # its writes to .grad (zero_, detach_) are torch's, not the user's
        aside = step_aside(adapter)
        try:
            result = original(self, *args, **kwargs)
        finally:
            adapter.tls.quiet -= 1
            step_back(adapter, aside)
        adapter.zero_grad_called(self)
        return result

    zero_grad.__wrapped__ = original
    zero_grad.__doc__ = original.__doc__
    return zero_grad


def _traced_thread(original):
    def _bootstrap_inner(self):
        adapter = _current[0]
        if adapter is None or _forked[0]:
            return original(self)
        try:
            mode = observing_mode(adapter)
            mode.__enter__()
        except Exception:
            return original(self)
        exact = adapter.exact  # exact memory: our saved-tensor hooks for this thread's run too
        try:
            if exact is not None:
                exact.enter_thread()
            return original(self)
        finally:
            try:
                if exact is not None:
                    exact.leave_thread()
                remove_mode(adapter.torch, mode)
            except Exception:
                pass

    _bootstrap_inner.__wrapped__ = original
    return _bootstrap_inner


class AccumulatorHook:
    """A leaf's AccumulateGrad post hook: the gradient just accumulated into ``.grad``."""

    __slots__ = ("tag",)

    def __init__(self, tag):
        self.tag = tag

    def __call__(self, grad_inputs, grad_outputs):
        tag = self.tag
        adapter = tag.owner
        call = adapter.backward_call
        if call is not None and adapter.attached:
            call.visit(tag.id, grad_outputs, tag.leaf)


def next_sequence_nr(torch):
    """The sequence number the next node built on this thread will get."""
    with torch.enable_grad():
        probe = torch.zeros((), requires_grad=True) * 1
    return probe.grad_fn._sequence_nr() + 1
