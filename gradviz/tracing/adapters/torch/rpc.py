"""``torch.distributed.rpc`` and distributed autograd, observed by the torch adapter.

- **Calls this process serves.** RPC runs a served Python function on one of its agent's own (C++) threads,
  through ``torch.distributed.rpc.internal._run_function``; the function mode is per thread, so none is there.
  That function is wrapped, and the wrapper pushes an observing mode on the serving thread for the call: the
  forward a parameter server runs for a trainer is recorded in the server's document, at the user's lines. The
  agent keeps the function it finds when RPC starts, so the wrapper must be in place before ``init_rpc``; it stays
  there for the process's life and passes calls straight through when no trace is attached. Functions of torch's
  own (``DistributedOptimizer``'s optimizer steps, RRef helpers) run unobserved: torch's machinery, not the user's.
- **``dist_autograd.backward(context_id, roots)``** is one C++ call the mode never sees: wrapped, it is reported
  as a backward of the local graph from ``roots``, with the ``SendRpcBackward`` nodes of the context (made in C++
  when a tensor that requires grad is sent) tagged like any node, so their gradients are recorded too. Leaves'
  gradients go to the context, not to ``.grad`` (their ``AccumulateGrad`` never runs): they are read from
  ``dist_autograd.get_gradients`` when the call ends.
- What stays out of sight is listed as ``unseen``: the part of a distributed backward a process runs at another
  process's request (no Python call starts or ends it), and RPC started before the trace attached.
"""

import sys
import weakref

from ...frames import location_at
from . import graph as tg
from . import patches as torch_patches
from .events import _here

HOW = "torch.distributed.rpc"

_state = {"adapter": None}  # the attached adapter the wrappers report to (None: they pass through)
_saved = []  # (module, name, original) of what install() replaced


def install(adapter):
    """Wrap the served-call entry and ``dist_autograd.backward`` (when torch imported them: it does, with torch)."""
    _state["adapter"] = adapter
    if _saved:
        return
    internal = sys.modules.get("torch.distributed.rpc.internal")
    autograd = sys.modules.get("torch.distributed.autograd")
    api = sys.modules.get("torch.distributed.rpc.api")
    if internal is not None and hasattr(internal, "_run_function"):
        current = internal._run_function
        wrapped = getattr(current, "gradviz_served", False)
        if not wrapped:  # wrapped once for the process (the agent keeps it)
            _replace(internal, "_run_function", _served_call(current), restore=False)
        if not wrapped and api is not None and _agent_running(api) and \
                not getattr(adapter, "rpc_started_before", False):
            adapter.rpc_started_before = True
            adapter.builder.unseen(
                "thread", "RPC calls this process served", how=f"{HOW} (started before the trace)",
                advice="start the trace before rpc.init_rpc: the served calls are observed from there")
    if api is not None and hasattr(api, "_invoke_rpc"):
        _replace(api, "_invoke_rpc", _sending_call(api._invoke_rpc))
    if autograd is not None and hasattr(autograd, "backward") and hasattr(autograd, "get_gradients"):
        _replace(autograd, "backward", _dist_backward(autograd.backward, autograd))


def uninstall(adapter):
    if _state["adapter"] is adapter:
        _state["adapter"] = None
        while _saved:
            owner, name, value = _saved.pop()
            setattr(owner, name, value)


def _replace(owner, name, value, restore=True):
    if restore:
        _saved.append((owner, name, getattr(owner, name)))
    else:  # the served-call wrapper: the RPC agent may hold it already, so it is never taken back
        value.gradviz_served = True
    setattr(owner, name, value)


def _agent_running(api):
    try:
        return bool(api._is_current_rpc_agent_set())
    except Exception:
        return False


def _observing(adapter):
    return adapter is not None and adapter.observing() and not adapter.tls.quiet


# ----- calls served ---------------------------------------------------------------------------------------------
def _served_call(original):
    def _run_function(python_udf):
        adapter = _state["adapter"]
        func = getattr(python_udf, "func", None)
        if not _observing(adapter) or _is_torchs(func):
            return original(python_udf)
        try:
            mode = torch_patches.observing_mode(adapter)
            mode.__enter__()
        except Exception as exc:
            adapter.internal_error("rpc", exc)
            return original(python_udf)
        try:
            _note_context(adapter, func)
            return original(python_udf)
        finally:
            try:
                torch_patches.remove_mode(adapter.torch, mode)
            except Exception as exc:
                adapter.internal_error("rpc", exc)

    _run_function.__wrapped__ = original
    return _run_function


def _is_torchs(func):
    module = getattr(func, "__module__", None) or getattr(getattr(func, "__func__", None), "__module__", "") or ""
    return module == "torch" or module.startswith("torch.")


def _note_context(adapter, func):
    """A call served inside another process's distributed autograd context: the ``RecvRpcBackward`` nodes of
    the tensors it was sent are reported (at the served function's first line); its part of that backward will
    run here, at that process's request, out of sight."""
    context = _context()
    if context is None:  # a plain call: no backward will come for it
        return
    code = getattr(func, "__code__", None)  # a function or method; a class made remotely has none
    with adapter.lock:
        _tag_recvs(adapter, context, None if code is None else location_at(code, code.co_firstlineno))
        context_id = context._context_id()
        if getattr(adapter, "rpc_last_context", None) == context_id:  # counted once per backward (context)
            return
        if not _others_in(context):  # a call in this process's own context: its backward is recorded here
            return
        adapter.rpc_last_context = context_id
        adapter.builder.unseen(
            "thread", "this process's part of distributed backwards another process started (dist_autograd.backward "
            "there; counted per distributed autograd context): its nodes are not visited in order, no gradient "
            "norms read, and the SendRpcBackward nodes RPC attaches to its answers are not recorded",
            how=HOW, advice="the forward served here is recorded; the backward is recorded in the document of the "
                            "process that called dist_autograd.backward, up to its SendRpcBackward/RecvRpcBackward "
                            "nodes")


def _others_in(context):
    """Whether the context was made by another process (distributed autograd puts the worker id of the process
    that made a context in the top 16 bits of its id; that process runs the backward)."""
    try:
        me = sys.modules["torch.distributed.rpc"].get_worker_info().id
        return (context._context_id() >> 48) != me
    except Exception:  # cannot tell: say it may be missed
        return True


# ----- calls made ------------------------------------------------------------------------------------------------
_OPTIMIZER_STEPS = ("torch.distributed.optim.optimizer._local_optimizer_step",
                    "__torch__.torch.distributed.optim.optimizer._script_local_optimizer_step")


def _sending_call(original):
    def _invoke_rpc(to, func, rpc_type, *args, **kwargs):
        result = original(to, func, rpc_type, *args, **kwargs)
        adapter = _state["adapter"]
        if _observing(adapter):
            try:
                location = _here()[1]
                with adapter.lock:
                    _tag_sends(adapter, location)
                    if _name_of(func) in _OPTIMIZER_STEPS:
                        adapter.builder.unseen(
                            "thread", "parameter updates DistributedOptimizer.step makes on each worker (torch's "
                            "own step function, run over RPC; counted per worker and step)", how=HOW,
                            location=location, advice="the gradients it steps with are recorded by "
                                                      "dist_autograd.backward; its updates are not")
                context = _context()
                if context is not None and getattr(rpc_type, "name", None) == "SYNC":
                    _answer(result)  # rpc_sync waits for it next anyway: its Recv node exists once it is here
                    with adapter.lock:
                        _tag_recvs(adapter, context, location)
                elif context is not None and hasattr(result, "add_done_callback"):
                    # rpc_async: tagged when the answer arrives (on an RPC thread), before the script can use it
                    result.add_done_callback(_on_answer(adapter, context._context_id(), location))
            except Exception as exc:
                adapter.internal_error("rpc", exc)
        return result

    _invoke_rpc.__wrapped__ = original
    return _invoke_rpc


def _name_of(func):
    qualified = getattr(func, "qualified_name", None)  # a TorchScript function
    if isinstance(qualified, str):
        return qualified
    return f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', '')}"


def _context(context_id=None):
    autograd = sys.modules.get("torch.distributed.autograd")
    try:
        if context_id is None:
            return autograd._current_context()
        return autograd._retrieve_context(context_id)
    except Exception:  # no such context (no dist_autograd.context() around the call)
        return None


def _on_answer(adapter, context_id, location):
    def tag(_future):
        try:
            context = _context(context_id)
            if context is not None and _state["adapter"] is adapter and adapter.attached:
                with adapter.lock:
                    _tag_recvs(adapter, context, location)
        except Exception as exc:  # on RPC's thread: never its problem
            adapter.internal_error("rpc", exc)

    return tag


def _answer(future):
    try:
        future.wait()
    except Exception:  # the call failed: rpc_sync's own wait raises it to the caller
        pass


def _tag_recvs(adapter, context, location):
    """Report the context's ``RecvRpcBackward`` nodes not known yet: made by RPC's threads when a tensor that
    requires grad arrived (as the answer of a call made at ``location``, or as an argument of a call served)."""
    for node in context._recv_functions().values():
        if tg.tag_of(node, adapter) is None:
            # reported as the op that made it: its sequence number is an RPC thread's, not comparable with the
            # traced thread's start (which would call it a node built before the trace)
            adapter._op_node(node, tg.info(node), True, location)


def _tag_sends(adapter, location, context_id=None):
    """Report the context's ``SendRpcBackward`` nodes not known yet (made by a call just sent, at ``location``)."""
    context = _context(context_id)
    if context is None:
        return
    for node in context._send_functions().values():
        adapter.node_key(node, location)


# ----- distributed backward --------------------------------------------------------------------------------------
def _dist_backward(original, autograd):
    def backward(context_id, roots, retain_graph=False):
        adapter = _state["adapter"]
        if not _observing(adapter):
            return original(context_id, roots, retain_graph)
        try:
            with adapter.lock:
                _tag_sends(adapter, None, context_id)  # sends made outside rpc_sync/rpc_async (rpc.remote)
                call = adapter._backward_begin((roots,), {"retain_graph": retain_graph}, "dist")
        except Exception as exc:
            adapter.internal_error("backward", exc)
            return original(context_id, roots, retain_graph)
        error = None
        try:
            return original(context_id, roots, retain_graph)
        except BaseException as exc:
            error = exc
            raise
        finally:
            try:
                _unmeasured_sends(adapter, call)
                if error is None:
                    _leaf_gradients(adapter, call, autograd, context_id)
                with adapter.lock:
                    adapter._backward_end(call, error)
            except Exception as exc:
                adapter.internal_error("backward", exc)
            light = adapter.light_steps
            if light.enabled and error is None and not light.has_optimizer:
                try:  # as for Tensor.backward: with no torch optimizer, a backward ends the iteration
                    light.backward_ended()
                except Exception as exc:
                    adapter.internal_error("schedule", exc)

    backward.__wrapped__ = original
    backward.__doc__ = original.__doc__
    return backward


def _leaf_gradients(adapter, call, autograd, context_id):
    """Leaves whose accumulator hooks did not report (distributed autograd runs an ``AccumulateGrad``'s hooks
    without running it; this covers a torch that does not): their gradients as the context holds them, last."""
    visited = {key for key, leaf, _ in call._order if leaf is not None}
    grads = autograd.get_gradients(context_id)
    live = adapter.builder.live_variables
    for leaf, grad in grads.items():
        if id(leaf) in live and id(leaf) not in visited:
            call.visit(id(leaf), (grad,), weakref.ref(leaf))


def _unmeasured_sends(adapter, call):
    """A ``SendRpcBackward`` gets its gradient from the other process inside the node: its prehook sees none, so
    its norm is recorded as not measured (None), not as a zero."""
    live = adapter.builder.live_nodes
    sends = {key for key, leaf, index in call._order
             if leaf is None and index < 0 and key in live and live[key].op == "SendRpcBackward"}
    if sends:
        call._flush()
        call._norms.append(None)
        unmeasured = len(call._norms) - 1
        call._order = [(key, leaf, unmeasured if key in sends and index < 0 else index)
                       for key, leaf, index in call._order]
