"""The torch adapter's exact-memory mode (``gradviz.trace(exact_memory=True)``): every tensor a node saves for
backward is seen as PyTorch saves it, through ``torch.autograd.graph.saved_tensors_hooks``, not read back from
the node's ``_raw_saved_*`` attributes (which miss what a node does not bind in Python).

How a saved tensor finds its node: a node is built (and gets the next sequence number of its thread) before it
saves anything, so each pack belongs to the node numbered ``_get_sequence_nr() - 1`` at that moment. Two
exceptions: an in-place op saving its target's old value saves a clone it made after its own node (the clone's
pack goes to the node before it), and a tensor saved outside any node (checkpoint's inputs) goes with the next
node. Packs wait here, as plain facts keyed by node number (no tensor), until the adapter reports the node
(right after the op) and takes them (``saved``). Our tensor reads in the hooks bypass the function mode.

The traps of saved-tensor hooks, each handled here:

- With any hooks, PyTorch no longer checks that a saved tensor is unchanged at backward ("modified by an
  inplace operation"). ``unpack`` redoes the check and raises the same ``RuntimeError`` with PyTorch's message.
- A pack that returns the tensor itself makes a saved output and its node a reference cycle PyTorch cannot
  collect: for an output ``pack`` keeps ``t.detach()`` (same memory, same version counter); an input is kept
  itself, as PyTorch keeps it without hooks (no cycle: its ``grad_fn`` is an earlier node).
- Hooks are a per-thread stack and only the top pair runs: a user's pair (``saved_tensors_hooks``,
  ``save_on_cpu``, ``torch.utils.checkpoint``'s) pushed while tracing is wrapped, so we still see each pack, and
  what the user's pack keeps (a CPU copy, a checkpoint's placeholder) is what is charged; their unpack runs
  unchanged (and, as without the trace, no version check is added to it). A block entered before the trace and
  ending inside it pops its own pair from under ours (the pop is wrapped while tracing); at stop ours leaves
  from under any pair pushed after it.
- ``disable_saved_tensors_hooks`` raises when any hooks are registered: while it is in force our pair steps off
  this thread's stack (and nodes built then are read from their ``_raw_saved_*`` attributes, as by default).
- Threads: the stack is per thread; the adapter's threads started while tracing get our pair for their run. A
  trace stopped from another thread takes our pair off the starting thread at that thread's own stop.
"""

import _thread
import threading

from ...facts import SavedFact
from . import graph as tg
from .compat import top_pair
from .patches import _forked

_fact = tuple.__new__  # _fact(SavedFact, (...)): a named fact without the namedtuple's Python __new__ frame

ANOMALY_HINT = (" Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
                "variable in question was changed in there or anywhere later. Good luck!")
HINT = (" Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
        "torch.autograd.set_detect_anomaly(True, check_nan=False).")  # torch 2.13's, if probing fails
_MAX_PENDING = 1024  # nodes whose packs wait for the adapter; beyond, the oldest are dropped (never reported)
MODE = "saved-tensors-hooks"  # the document's engine.memory in this mode (the default mode: "saved-attributes")


class Packed:
    """What a node holds for one saved tensor: the tensor (an output detached: its memory and version counter,
    not its graph), the version it was saved at, and for an output what PyTorch's stale-version message names."""

    __slots__ = ("tensor", "version", "output", "name", "output_nr")

    def __init__(self, tensor, version, output, name, output_nr):
        self.tensor = tensor
        self.version = version
        self.output = output
        self.name = name  # an output's node (the node that saved it)
        self.output_nr = output_nr


class _Wrapped:
    """A pack of a user's hooks pair: the user's packed value, unpacked by the user's unpack."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _PerThread(threading.local):
    """This thread's packs and the state of our pair on its stack."""

    pending = None  # sequence number -> [pack facts] for nodes not reported yet
    claimed = -1  # the highest sequence number of a node reported on this thread
    installed = 0  # how many times our pair is on this thread's stack (0 or 1)
    aside = 0  # our pair is off the stack for a disable_saved_tensors_hooks block


class ExactMemory:
    """Owned by one ``TorchAdapter``; ``install()`` / ``uninstall()`` at its attach and detach."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.torch = torch = adapter.torch
        C = torch._C._autograd
        self._push = C._push_saved_tensors_default_hooks
        self._pop = C._pop_saved_tensors_default_hooks
        self._top = top_pair(torch)  # (torch/compat: its signature differs between torch lines)
        self._seq = C._get_sequence_nr
        self.tls = _PerThread()
        self.unobserved = torch._C.DisableTorchFunction  # no function mode (ours included) sees what runs in it
        self.pack = self._make_pack()
        self.unpack = self._make_unpack()
        self.hint = None  # the hint PyTorch appends to the stale-version message (its wording varies by version)
        self.message_name = adapter.compat.stale_name  # how that message names a node (torch/compat)
        self._patched = []

    # ----- lifecycle ------------------------------------------------------------------------------------
    def install(self):
        self._patch()
        self.enter_thread()

    def uninstall(self):
        self.leave_thread()
        self._unpatch()

    def enter_thread(self):
        """Push our pair on this thread's stack (once; while saved-tensor hooks are disabled here, later)."""
        tls = self.tls
        if tls.installed:
            return
        if tls.pending is None:
            tls.pending = {}
        tls.claimed = self._seq() - 1  # nodes built before are not ours: a pack now is on its own
        torch = self.torch
        if torch._C._autograd._saved_tensors_hooks_get_disabled_error_message() is not None:
            tls.aside += 1  # a disable_saved_tensors_hooks block is running: pushed when it ends
            return
        self._push(self.pack, self.unpack)
        tls.installed = 1

    def leave_thread(self):
        """Pop our pair from this thread's stack, from under the pairs pushed after it (a trace stopped inside a
        ``saved_tensors_hooks`` block entered while tracing): those are put back as they were."""
        tls = self.tls
        tls.aside = 0
        tls.pending = None
        if not tls.installed:
            return
        tls.installed = 0
        above = []
        while True:
            top = self._top()
            if top is None:
                break
            self._pop()
            if top[0] is self.pack:
                break
            above.append(top)
        for pair in reversed(above):
            self._push(*pair)

    def _probe_hint(self):
        """PyTorch's own hint after the stale-version message (its wording varies by version), from one small
        failure on a bare thread: no function mode, no saved-tensor hooks (a user's pack must not see it). None
        in anomaly mode (whose hint is another, and which would warn): probed again when next needed. Probed
        when first needed, not at install: a trace may attach while ``import torch`` holds the import lock,
        which the probe's thread could wait for."""
        torch = self.torch
        if torch.is_anomaly_enabled():
            return None
        found = [""]
        done = _thread.allocate_lock()
        done.acquire()

        def probe():
            try:
                with torch.enable_grad():
                    x = torch.zeros(1, requires_grad=True)
                    y = x.exp()
                    y.add_(1)
                    torch.autograd.grad(y, x, torch.ones(1))
            except RuntimeError as exc:
                found[0] = str(exc).partition("instead.")[2]
            except Exception:
                pass
            finally:
                done.release()

        _thread.start_new_thread(probe, ())
        if not done.acquire(timeout=10):  # never hang the user's backward over a message
            return HINT
        return found[0] or HINT

    # ----- the hooks ----------------------------------------------------------------------------------------
    def _make_pack(self):
        seq = self._seq
        adapter = self.adapter
        tls = self.tls
        facts = self._facts
        unobserved = self.unobserved

        def pack(t):
            with unobserved():  # our tensor reads must not reach the mode (t.detach() would report t's node)
                node = seq() - 1
                if node <= tls.claimed:  # no node is being built: a tensor saved on its own (checkpoint's inputs)
                    node += 1  # goes with the next node (the region's first, which keeps it alive)
                fn = t.grad_fn
                output = fn is not None and fn._sequence_nr() == node
                if output:
                    name = fn.name()
                    if name == "CloneBackward0":  # an in-place op saving its target's old value: the clone it
                        node -= 1  # made, after its own node (mul_, clamp_, silu_, GRU's cells)
                        output = False
                if output:  # the node's own output: kept detached, or node and output make a cycle
                    packed = Packed(t.detach(), t._version, True, name, t.output_nr)
                else:
                    packed = Packed(t, t._version, False, None, 0)
                if adapter.attached and not _forked[0]:  # (a forked DataLoader worker records nothing)
                    pending = tls.pending
                    if pending is not None:
                        facts(pending, node, t, output, t)
            return packed

        return pack

    def _make_unpack(self):
        stale = self._stale
        unobserved = self.unobserved

        def unpack(packed):
            t = packed.tensor
            with unobserved():
                if t._version != packed.version:
                    raise RuntimeError(stale(packed))
            return t

        return unpack

    def _stale(self, packed):
        """PyTorch's message for a saved tensor changed in place: it names the tensor as saved for an output;
        for an input, the tensor as it is now (its type, sizes and current ``grad_fn``, output 0)."""
        t = packed.tensor
        if packed.output:
            name = packed.name
        else:
            fn = t.grad_fn
            name = None if fn is None else fn.name()
        sizes = "[" + ", ".join(str(d) for d in t.shape) + "]"
        text = (f"one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{t.type()} {sizes}]")
        if name is not None:
            text += f", which is output {packed.output_nr} of {self.message_name(name)},"
        text += f" is at version {packed.tensor._version}; expected version {packed.version} instead."
        if self.torch.is_anomaly_enabled():
            return text + ANOMALY_HINT
        if self.hint is None:
            self.hint = self._probe_hint() or ""
        return text + self.hint

    def _facts(self, pending, node, t, output, kept):
        """Note what node ``node`` saved: tensor ``t`` (the one saved), its memory being ``kept`` (``t`` itself,
        a user's copy of it, or None when the user's pack kept no tensor)."""
        try:
            storage = t.untyped_storage()
            if t.is_cpu:  # (tg.storage_key, inline: once per saved tensor)
                counter = ("cpu", -1, storage.data_ptr())
                device = "cpu"
            else:
                counter = (t.device.type, t.get_device(), storage.data_ptr())
                device = str(t.device)
            nbytes = t.nbytes
            if kept is None:
                block = block_bytes = span = None
            else:
                if kept is t:
                    block, block_bytes = counter, storage.nbytes()
                else:
                    block, block_bytes = tg.storage_key(kept)
                if block == counter and _is_parameter_storage(t):  # a parameter's memory is the model's
                    block = None
                first = t.data_ptr()
                span = (counter, first, first + nbytes if t.is_contiguous() else tg.span(t)[1])
            fact = (output, tuple(t.shape), nbytes, t._version, counter, block, block_bytes, device, span,
                    kept is not None)
        except Exception:  # a tensor without memory (fake, meta during compilation): nothing to book
            return
        entry = pending.get(node)
        if entry is None:
            if len(pending) >= _MAX_PENDING:
                for key in list(pending)[:_MAX_PENDING // 2]:
                    del pending[key]
            pending[node] = [fact]
        else:
            entry.append(fact)

    # ----- a user's hooks, disable_saved_tensors_hooks ------------------------------------------------------------
    def _patch(self):
        if self._patched:
            return
        torch = self.torch
        hooks_class = torch.autograd.graph.saved_tensors_hooks
        C = torch._C._autograd
        enter = hooks_class.__dict__["__enter__"]
        pop = self._pop
        disable = C._saved_tensors_hooks_disable
        enable = C._saved_tensors_hooks_enable
        self._patched = [(hooks_class, "__enter__", enter), (C, "_pop_saved_tensors_default_hooks", pop),
                         (C, "_saved_tensors_hooks_disable", disable), (C, "_saved_tensors_hooks_enable", enable)]
        exact = self

        def __enter__(hooks):  # what saved_tensors_hooks.__enter__ does, with the pair wrapped
            pair = _UserPair(exact, hooks.pack_hook, hooks.unpack_hook)
            exact._push(pair.pack, pair.unpack)

        __enter__.__wrapped__ = enter

        def _pop_saved_tensors_default_hooks():
            # a block entered before the trace started ends (its __exit__ pops) under our pair: its pair goes,
            # from under ours
            top = exact._top()
            if exact.tls.installed and top is not None and top[0] is exact.pack:
                pop()
                try:
                    return pop()
                finally:
                    exact._push(exact.pack, exact.unpack)
            return pop()

        def _saved_tensors_hooks_disable(message, *args, **kwargs):
            tls = exact.tls
            stepped = False
            if tls.installed:
                top = exact._top()
                if top is not None and top[0] is exact.pack:  # ours alone would make it raise: step aside
                    exact._pop()
                    tls.installed = 0
                    stepped = True
            try:
                return disable(message, *args, **kwargs)
            except BaseException:
                if stepped:
                    exact._push(exact.pack, exact.unpack)
                    tls.installed = 1
                raise
            finally:
                if stepped and not tls.installed:
                    tls.aside += 1

        def _saved_tensors_hooks_enable(*args, **kwargs):
            result = enable(*args, **kwargs)
            tls = exact.tls
            if tls.aside and exact.adapter.attached:
                tls.aside = 0
                exact.enter_thread()
            return result

        hooks_class.__enter__ = __enter__
        C._pop_saved_tensors_default_hooks = _pop_saved_tensors_default_hooks
        C._saved_tensors_hooks_disable = _saved_tensors_hooks_disable
        C._saved_tensors_hooks_enable = _saved_tensors_hooks_enable

    def _unpatch(self):
        while self._patched:
            owner, name, value = self._patched.pop()
            setattr(owner, name, value)

    # ----- what a node saved ------------------------------------------------------------------------------
    def saved(self, node, info, tensors, tag=None):
        """``SavedFact``s for what ``node`` saved (as
        ``TorchAdapter._saved``), from its packs. A node built while our pair was off the stack (a
        ``disable_saved_tensors_hooks`` block), or before the trace, is read from its ``_raw_saved_*`` attributes
        instead."""
        tls = self.tls
        pending = tls.pending
        seq = node._sequence_nr()
        if seq > tls.claimed:
            tls.claimed = seq
        found = None if pending is None else pending.pop(seq, None)
        if found is None:
            adapter = self.adapter
            before_trace = 0 <= seq < adapter._start_seq.get(threading.get_ident(), -1)
            if (before_trace or tls.aside) and info.saved:
                return type(adapter)._saved(adapter, node, info, tensors, tag)
            if tag is not None:
                tag.spans = None
            return []
        adapter = self.adapter
        facts = []
        spans = []
        args = None
        counts = [0, 0]
        for output, shape, nbytes, version, counter, block, block_bytes, device, span, kept in found:
            vkey = None
            if not output and tensors:
                if args is None:
                    args = [(a.untyped_storage().data_ptr(), "cpu" if a.is_cpu else a.device.type, a)
                            for a in tensors]
                for ptr, dev, a in args:
                    if ptr == counter[2] and dev == counter[0]:
                        vkey = adapter.var(a)
                        break
            kind = "output" if output else "input"
            index = counts[output]
            counts[output] += 1
            if not kept:  # a user's pack kept no tensor (a checkpoint's placeholder): nothing held, nothing checked
                facts.append(_fact(SavedFact, (vkey, kind, index, shape, nbytes, version, None, None, None, device,
                                               None)))
                continue
            facts.append(_fact(SavedFact, (vkey, kind, index, shape, nbytes, version, counter, block, block_bytes,
                                           device, counter)))
            spans.append(span)
        if tag is not None:
            tag.spans = tuple(spans) or None  # a tuple of atoms, as the adapter keeps it
        return facts


class _UserPair:
    """A user's hooks pair pushed while tracing, wrapped: their pack and unpack run as given; we note the pack
    for its node, charging the tensors the user's packed value holds."""

    __slots__ = ("exact", "user_pack", "user_unpack")

    def __init__(self, exact, pack, unpack):
        self.exact = exact
        self.user_pack = pack
        self.user_unpack = unpack

    def pack(self, t):
        exact = self.exact
        node = exact._seq() - 1
        if node <= exact.tls.claimed:  # saved on its own (as in ExactMemory's pack)
            node += 1
        quiet = exact.adapter.tls  # the user's pack runs unreported, as a tensor hook does
        quiet.quiet += 1
        try:
            value = self.user_pack(t)
        finally:
            quiet.quiet -= 1
        if exact.adapter.attached and not _forked[0]:
            pending = exact.tls.pending
            if pending is not None:
                with exact.unobserved():
                    fn = t.grad_fn
                    output = fn is not None and fn._sequence_nr() == node
                    if output and fn.name() == "CloneBackward0":  # (as in ExactMemory's pack)
                        node -= 1
                        output = False
                    exact._facts(pending, node, t, output, _held_tensor(value, exact.torch.Tensor))
        return _Wrapped(value)

    def unpack(self, packed):
        return self.user_unpack(packed.value if type(packed) is _Wrapped else packed)


def _held_tensor(value, Tensor, depth=0):
    """The first tensor a user's packed value holds (a tensor, or one inside a tuple, list or dict)."""
    if isinstance(value, Tensor):
        return value
    if depth < 3:
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
        for item in items:
            found = _held_tensor(item, Tensor, depth + 1)
            if found is not None:
                return found
    return None


def _is_parameter_storage(t):
    base = t._base if t._base is not None else t
    return base.is_leaf and base.requires_grad
