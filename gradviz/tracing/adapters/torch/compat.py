"""What the installed PyTorch lets the adapter do, found by trying each internal, not by reading the version.

Every private piece of PyTorch the ``torch_*`` adapter modules touch and that has changed between torch lines is
probed here once per torch, by what it does, and each answer names the way to use it:

- ``apply``: how ``Function.apply`` is held on the class. A ``classmethod`` wrapping a Python function (torch
  <= 2.13) or a C ``classmethod_descriptor`` (2.14 and later): ``wrap_apply`` / the saved class entry cover both.
- ``saved``: how a node's saved tensors are read. ``"data"``: its ``_raw_saved_*`` attributes are SavedTensor
  objects with a ``.data`` (the tensor, None once freed; 2.13 and later); ``"unpack"``: older SavedTensor objects
  expose only ``register_hooks``, so the node's unpacking attributes (``_saved_*``, a custom Function's
  ``saved_tensors``) are read instead; None: neither works, memory is not measured (said in ``unseen``).
- ``exact``: whether the saved-tensor default hooks machinery ``--exact-memory`` needs is all there.
- ``node_shapes``: whether a node carries its outputs' shapes (``_input_metadata``, not on torch 2.4), which a
  light iteration reads to see a loss-shape mistake near the loss.
- ``stale``: the pattern that reads both versions out of PyTorch's "modified by an inplace operation" message,
  checked against the message this torch really raises; ``stale_name``: how that message names a node
  (``ExpBackward0`` up to 2.9, ``Exp`` in 2.13 and later), read from the same message.
- ``is_compiling``: "is the compiler tracing": dynamo's own flag, or a fake-tensor mode on the dispatch stack
  (the compiler's later passes, which on some torch lines call a user's torch-function modes with the flag off).
- ``accelerator``: what the torch build was made for and what this machine has (a CUDA wheel on a CPU machine).

``problems`` lists, per fact that cannot be reached here, ``(what, how)`` for the document's ``unseen`` section.
Tests force a fallback by replacing ``probe``'s answer (``forced``).
"""

import re
import threading

STALE_DEFAULT = re.compile(r"is at version (\d+); expected version (\d+)")
# a looser reading kept for a wording we have not seen: the two numbers in the order PyTorch gives them
_STALE_LOOSE = re.compile(r"version (\d+)\D+?version (\d+)")

# the internals --exact-memory pushes, pops and reads (torch._C._autograd)
_EXACT_NEEDS = ("_push_saved_tensors_default_hooks", "_pop_saved_tensors_default_hooks",
                "_top_saved_tensors_default_hooks", "_get_sequence_nr",
                "_saved_tensors_hooks_get_disabled_error_message", "_saved_tensors_hooks_disable",
                "_saved_tensors_hooks_enable")


class TorchCompat:
    """The answers for one torch (see the module's docstring)."""

    def __init__(self, version, apply, saved, exact, stale, is_compiling, accelerator, problems,
                 stale_name=None, node_shapes=True):
        self.version = version
        self.apply = apply  # "classmethod" or "descriptor"
        self.saved = saved  # "data", "unpack" or None
        self.exact = exact  # None when usable, else what is missing
        self.stale = stale
        self.stale_name = stale_name or short_node_name  # node class name -> as the stale message names it
        self.node_shapes = node_shapes
        self.is_compiling = is_compiling
        self.accelerator = accelerator
        self.problems = problems  # [(what, how)]: facts not measured on this torch

    def saved_attr(self, raw_name):
        """The attribute to read for a node's ``_raw_saved_X`` under this torch's way of reading."""
        if self.saved != "unpack":
            return raw_name
        if raw_name == "_raw_saved_tensors":  # a custom Function's node
            return "saved_tensors"
        return "_saved_" + raw_name[len("_raw_saved_"):]


_probed = {}
forced = {}  # tests: {"saved": "unpack", ...} overrides what the probe found


def probe(torch):
    """The answers for ``torch`` (probed once, then cached), with any ``forced`` answer applied."""
    found = _probed.get(id(torch))
    if found is None:
        found = _probed[id(torch)] = _probe(torch)
    if not forced:
        return found
    answers = dict(vars(found), **forced)
    compat = TorchCompat(**answers)
    compat.problems = _problems(compat)
    return compat


def _probe(torch):
    with torch._C.DisableTorchFunction():  # a trace already attached must not see the probes' ops
        saved, (stale, stale_name) = _saved_access(torch), _stale_message(torch)
        node_shapes = _node_shapes(torch)
    compat = TorchCompat(torch.__version__, _apply_kind(torch), saved, _exact_missing(torch), stale,
                         _compiler_tracing(torch), accelerator(torch), [], stale_name, node_shapes)
    compat.problems = _problems(compat)
    return compat


def _problems(compat):
    problems = []
    if compat.saved is None:
        problems.append(("saved-tensor memory", f"torch {compat.version}: a node's saved tensors cannot be read "
                         "(SavedTensor has no data access and the node's _saved_* attributes do not unpack)"))
    return problems


# ----- Function.apply ---------------------------------------------------------------------------------------
def _apply_kind(torch):
    entry = torch.autograd.function.Function.__dict__.get("apply")
    if isinstance(entry, classmethod):
        return "classmethod"
    return "descriptor"  # a C classmethod_descriptor (torch 2.14+): bound to a class through __get__


def apply_function(entry):
    """``apply(cls, *args, **kwargs)`` calling what ``Function.__dict__["apply"]`` holds, in either form."""
    if isinstance(entry, classmethod):
        return entry.__func__

    def apply(cls, *args, **kwargs):
        return entry.__get__(None, cls)(*args, **kwargs)

    apply.__doc__ = getattr(entry, "__doc__", None)
    return apply


# ----- saved tensors ----------------------------------------------------------------------------------------
def _saved_access(torch):
    """Try both ways of reading a saved tensor on a node made for the purpose: the tensor must come back."""
    with torch.enable_grad():
        x = torch.ones(2, requires_grad=True)
        node = x.exp().grad_fn
    raw = getattr(node, "_raw_saved_result", None)
    if isinstance(getattr(raw, "data", None), torch.Tensor):
        return "data"
    try:
        if isinstance(node._saved_result, torch.Tensor):
            return "unpack"
    except (AttributeError, RuntimeError):
        pass
    return None


def _node_shapes(torch):
    with torch.enable_grad():
        node = torch.ones(2, requires_grad=True).exp().grad_fn
    return getattr(node, "_input_metadata", None) is not None


def read_data(node, attr):
    """``[(index, tensor or None)]`` for one ``_raw_saved_*`` attribute (None: freed, or what a hooks pair's
    pack kept instead), or None when the attribute cannot be read."""
    try:
        value = getattr(node, attr)
    except RuntimeError:
        return None
    if type(value) is list or type(value) is tuple:
        return [(i, getattr(item, "data", None)) for i, item in enumerate(value)]
    return ((0, getattr(value, "data", None)),)


def read_unpacked(node, attr):
    """The same from an unpacking attribute (``_saved_*``, ``saved_tensors``): it gives the tensors themselves,
    and raises once backward freed them. Only read right after the op (or on a node we did not see built), when
    the versions still match: a later read of an overwritten tensor would raise PyTorch's stale-version error,
    which is not a free."""
    try:
        value = getattr(node, attr)
    except RuntimeError as exc:
        if "freed" in str(exc):
            return ((0, None),)  # as a freed SavedTensor's data reads
        return ()
    if type(value) is list or type(value) is tuple:
        return [(i, item) for i, item in enumerate(value)]
    return ((0, value),)


def top_pair(torch):
    """A function giving the saved-tensor hooks pair on top of this thread's stack, or None. Its one argument
    (``ignore_is_tracing``) is newer than some torch lines: called without it there."""
    top = torch._C._autograd._top_saved_tensors_default_hooks
    try:
        top(True)
    except TypeError:
        return top
    return lambda: top(True)


def top_hooks(torch):
    """A function telling whether saved-tensor hooks are on this thread's stack (an unpacking read would run
    their unpack: the user's code, and another tensor than the one saved); None where this torch cannot read
    its stack (no ``_top_saved_tensors_default_hooks``: ``HookCount`` counts the pushes instead)."""
    if not hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks"):
        return None
    top = top_pair(torch)
    return lambda: top() is not None


class HookCount(threading.local):
    """Where torch cannot read its saved-tensor hook stack: the pairs pushed on this thread while the trace is
    attached (torch_patches wraps torch._C._autograd's push and pop with ``wrap``). A pair pushed before the
    trace started is not counted."""

    depth = 0

    def __call__(self):
        return self.depth > 0

    def wrap(self, push, pop):
        def _push_saved_tensors_default_hooks(*args, **kwargs):
            result = push(*args, **kwargs)
            self.depth += 1
            return result

        def _pop_saved_tensors_default_hooks(*args, **kwargs):
            result = pop(*args, **kwargs)
            if self.depth:
                self.depth -= 1
            return result

        return _push_saved_tensors_default_hooks, _pop_saved_tensors_default_hooks


# ----- torch.func's wrapped tensors ------------------------------------------------------------------------
def outside_functorch(torch, fn, tensors):
    """``fn(torch, tensors)`` on the plain tensors under torch.func's wrappers, with its transforms set aside. A
    gradient met inside ``torch.func.grad`` is a wrapper whose values sit in the tensor it wraps; on some torch
    lines (2.4, 2.9) reading a wrapper (``.tolist()``, ``data_ptr``) raises "doesn't have storage", and an op run
    while the transform is active wraps its result again. A vmapped tensor's plain form holds every sample (a
    norm of it is over the whole batch)."""
    functorch = getattr(torch._C, "_functorch", None)
    disable = getattr(torch._C, "_DisableFuncTorch", None)
    if functorch is None or disable is None:
        return fn(torch, tensors)
    wrapped, unwrap = functorch.is_functorch_wrapped_tensor, functorch.get_unwrapped
    plain = []
    for t in tensors:
        while wrapped(t):
            t = unwrap(t)
        plain.append(t)
    with disable():
        return fn(torch, plain)


# ----- --exact-memory ---------------------------------------------------------------------------------------
def _exact_missing(torch):
    C = torch._C._autograd
    missing = [name for name in _EXACT_NEEDS if not hasattr(C, name)]
    if not hasattr(getattr(torch.autograd, "graph", None), "saved_tensors_hooks"):
        missing.append("torch.autograd.graph.saved_tensors_hooks")
    return ", ".join(missing) or None


# ----- the stale-version message ----------------------------------------------------------------------------
def _stale_message(torch):
    """Raise PyTorch's own stale-version error on a two-op graph: the pattern that reads its versions, and how it
    names the node whose output was changed (the changed tensor's ``grad_fn``, AddBackward0 here)."""
    with torch.enable_grad():
        x = torch.ones(2, requires_grad=True)
        y = x * 1
        z = y.sin()  # saves its input
        y.add_(1)
        try:
            z.sum().backward()
        except RuntimeError as exc:
            message = str(exc)
        else:
            return STALE_DEFAULT, None
    name = str if f" of {y.grad_fn.name()}," in message else short_node_name
    found = STALE_DEFAULT.search(message)
    if found and (found.group(1), found.group(2)) == ("1", "0"):
        return STALE_DEFAULT, name
    found = _STALE_LOOSE.search(message)
    if found and (found.group(1), found.group(2)) == ("1", "0"):
        return _STALE_LOOSE, name
    return STALE_DEFAULT, name


def short_node_name(name):
    """A node as torch 2.13's stale-version message names it: ExpBackward0 -> Exp, UnsqueezeBackward1 ->
    Unsqueeze1, a custom Function's TwoBackward -> Two, CopySlices as it is."""
    if name.endswith("Backward0"):
        return name[:-9]
    return name.replace("Backward", "", 1)


def stale_versions(pattern, message):
    """``(current, expected)`` from a stale-version message, or None."""
    found = pattern.search(message)
    return None if found is None else (int(found.group(1)), int(found.group(2)))


# ----- compilation ------------------------------------------------------------------------------------------
def _is_compiling(torch):
    """The function dynamo folds to True while it traces. ``torch.compiler.is_compiling`` on the torch lines that
    have it (dynamo lists it among its tracing-state functions); ``torch._dynamo.external_utils.is_compiling``
    before, which dynamo has folded since 2.0 (imported only where the first is missing: dynamo is slow to
    import)."""
    compiler = getattr(torch, "compiler", None)
    found = getattr(compiler, "is_compiling", None)
    if callable(found):
        return found
    try:
        from torch._dynamo.external_utils import is_compiling
    except ImportError:
        return lambda: False
    return is_compiling


def _compiler_tracing(torch):
    """True while the compiler traces, in any of its stages. Dynamo's flag covers its own bytecode tracing; the
    graphs AOTAutograd and inductor then build run the model again on fake tensors, and torch lines whose dynamo
    does not set the user's torch-function modes aside while compiling (2.4 does not; 2.9 does) call our mode
    there with the flag off: an op recorded then (its bookkeeping runs torch ops of its own) lands in the
    compiled graph as a fake constant ("Unexpected fake buffer"). A fake-tensor mode on the dispatch stack tells
    those stages, on every line that has the infra-mode keys (2.1 and later): the user's own ops never run under
    one unless the user pushed it, and ops on fake tensors have nothing to measure."""
    is_compiling = _is_compiling(torch)
    get_mode = getattr(torch._C, "_get_dispatch_mode", None)
    fake = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)
    if get_mode is None or fake is None:
        return is_compiling

    def compiler_tracing():  # dynamo's flag first: dynamo traces this function too, and folds the flag to True
        return is_compiling() or get_mode(fake) is not None

    return compiler_tracing


def compiler_checks(torch):
    """``_compiler_tracing``'s two checks apart, for a caller that makes them inline (the function mode, once
    per torch call: one Python frame less): ``(flag, get_mode, fake)``, compiling when ``flag()`` or
    ``get_mode(fake) is not None``. On a torch without the infra-mode keys ``get_mode`` is a dict's ``get``,
    which finds nothing."""
    get_mode = getattr(torch._C, "_get_dispatch_mode", None)
    fake = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)
    if get_mode is None or fake is None:
        return _is_compiling(torch), {}.get, None
    return _is_compiling(torch), get_mode, fake


# ----- the accelerator --------------------------------------------------------------------------------------
def accelerator(torch):
    """``{"built": "cuda 13.0" or None, "available": bool, "devices": n}``: what this torch wheel was built for,
    and whether this machine can use it (a CUDA wheel on a CPU machine: built, not available)."""
    version = getattr(torch, "version", None)
    built = None
    for name in ("cuda", "hip", "xpu"):
        value = getattr(version, name, None)
        if value:
            built = f"{name} {value}"
            break
    available = False
    count = 0
    try:
        cuda = torch.cuda
        available = bool(cuda.is_available())
        count = cuda.device_count() if available else 0
    except Exception:  # a broken driver install must not stop the trace
        available = False
    return {"built": built, "available": available, "devices": count}
