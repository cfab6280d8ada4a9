"""The PyTorch adapter: watches real PyTorch and reports what it does to a ``TraceBuilder`` as neutral facts.

This module and its ``torch_*`` siblings are the only gradviz code that touches PyTorch's internals. How:

- A ``TorchFunctionMode`` (one per observed thread, ``torch/patches``) sees every call of the Python API: ops,
  ``.grad`` reads and writes, ``.data`` / ``detach`` / ``numpy`` / ``item`` / ``tolist`` cuts,
  ``register_hook`` / ``retain_grad``, ``backward`` / ``autograd.grad``. The user's line is the first frame
  outside gradviz and torch (``torch/frames``).
- New graph nodes are found by walking ``out.grad_fn`` through ``next_functions`` to the nodes already known; a
  node is known by the tag in its ``metadata`` (our key; its death tells us the node died), and the tag is its
  backward prehook (``torch/graph``).
- Saved tensors and retained memory: the node's ``_raw_saved_*`` attributes, read right after the op, so
  PyTorch's own version checks stay intact. A non-retaining backward frees every node it ran.
- An in-place change: a tensor argument's ``_version`` moved during the call.
- Modules: global forward pre/post hooks. Optimizer steps: ``register_optimizer_step_pre/post_hook``.
- Not seen by the mode, so patched while attached and restored after (``torch/patches``): ``Function.apply``
  (a custom Function's node gets its own line; ``on_custom_function`` is where those calls are seen),
  ``Optimizer.zero_grad`` / ``Module.zero_grad``, and ``Thread._bootstrap_inner`` (threads started while
  tracing are observed; threads started before are not).

Never break the script: PyTorch's calls run exactly as without the trace and their exceptions pass through
unchanged; a failure of our own bookkeeping is recorded in ``internal_errors`` instead. While dynamo compiles
(``torch.compiler.is_compiling()``) and in forked child processes (DataLoader workers) every handler steps aside.
"""

import gc
import itertools
import os
import threading
import weakref

from ...builder import LEAF
from ...facts import OutputFact, SavedFact
from ...frames import location_at
from ..mode_watch import torch_watch
from ..modules import ModuleNames
from ..optimizer_watch import torch_optimizers
from . import compat as torch_compat
from . import graph as tg
from . import patches as torch_patches
from . import rpc as torch_rpc
from .events import OutputChecks, PerThread, TorchEvents
from .frames import set_torch_dir, where
from .light import TorchLight
from .meta import op_meta


class TorchVersionError(ImportError):
    pass


def check_version(torch):
    """One line when the installed torch is outside what this adapter supports (``torch_support.unsupported``)."""
    from .support import unsupported

    reason = unsupported(getattr(torch, "__version__", "unknown"))
    if reason is not None:
        raise TorchVersionError(reason)


_fact = tuple.__new__  # _fact(SavedFact, (...)): a named fact without the namedtuple's Python __new__ frame
_dtype_names = {}  # torch.float32 -> "float32"


def dtype_name(dtype):
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).rpartition(".")[2]
    return name


class _Ref(weakref.ref):
    """A weak reference that knows the key of its object (a tensor, or a node's tag)."""

    __slots__ = ("key",)


class _Own:
    """``with adapter.lock:`` the builder's lock for facts (which also loads the calling thread's own state: its
    module stack, its backward in progress), and this thread quiet (the mode lets our own torch calls through)."""

    __slots__ = ("builder", "tls")

    def __init__(self, builder, tls):
        self.builder = builder
        self.tls = tls

    def __enter__(self):
        self.builder.acquire()
        self.tls.quiet += 1

    def __exit__(self, *exc):
        self.tls.quiet -= 1
        self.builder.release()
        return False


class TorchAdapter(TorchEvents):
    """Watches real PyTorch for a ``TraceBuilder``: ``attach()`` / ``detach()`` start and stop watching."""

    name = "torch"

    def __init__(self, builder):
        try:
            import torch
        except ImportError:
            raise ImportError("engine='torch' needs PyTorch, which is not installed: pip install 'gradviz[torch]'") \
                from None
        check_version(torch)
        self.compat = compat = torch_compat.probe(torch)
        tg.configure(compat)
        # on a torch whose saved tensors are read by unpacking: tells when hooks would run on the read
        self._unpack_hooked = None
        if compat.saved == "unpack":
            self._unpack_hooked = torch_compat.top_hooks(torch) or torch_compat.HookCount()
        self.torch = torch
        self.builder = builder
        self.attached = False
        self.tls = PerThread()
        # around all our bookkeeping: facts go to the builder one at a time, each thread with its own state, and
        # the torch calls we make ourselves from hooks must not come back through our own mode
        self.lock = _Own(builder, self.tls)
        self._keys = itertools.count(1)  # node keys: never reused (unlike id())
        self.names = ModuleNames()
        self._devices = set()
        self._cpu_seen = False
        self._start_seq = {}  # thread id -> the sequence number of the first node built after attach
        self._froze = False
        self._thresholds = None  # the collector's thresholds to put back at detach (see _collect_less)
        self._Tensor = torch.Tensor
        self._Parameter = torch.nn.Parameter
        # results that hold no tensor (t.size(), t.dim(), bool(t), torch._C._set_grad_enabled's None): a call
        # returning one reports nothing unless it wrote an argument in place
        self._no_tensor = frozenset((int, float, bool, type(None), torch.Size))
        # the weak references' callbacks, bound once: the builder's own, which take its lock (no torch call
        # runs there, so the thread need not be made quiet)
        self._var_gone = builder.variable_handle_died
        self._node_gone = builder.node_handle_died
        TorchEvents.__init__(self)
        self.checks = OutputChecks(torch, builder)
        self.nonfinite_looked = None  # the first NaN/Inf whose graph was read for data that carried it
        self.owners = None  # for a snapshot given the model: {id(parameter): module stack}
        self.exact = None  # exact memory (torch/exact_memory): saved tensors seen as packed, not read back
        self._arguments = None  # (tensors, unique ones, their edges) of the call whose nodes are being reported
        self.light_steps = TorchLight(self)  # light iterations (tracing/schedule.py)
        self.training_watch = torch_watch(self)  # train/eval modes (tracing/training_facts.py)
        self.optimizer_watch = torch_optimizers(self)  # optimizers' constructions (likewise)
        builder.engine("torch", torch.__version__, (), memory="saved-attributes" if compat.saved else "not-measured",
                       accelerator=compat.accelerator)
        for what, how in compat.problems:
            builder.unseen("not-measured", what, how=how)

    def exact_memory(self):
        """Measure saved memory from ``saved_tensors_hooks`` packs (``gradviz.trace(exact_memory=True)``)."""
        if self.exact is None:
            missing = self.compat.exact
            if missing is not None:  # this torch lacks what the hooks pair needs: the default reading stays
                self.builder.unseen("not-measured", "exact saved-tensor memory (--exact-memory)",
                                    how=f"torch {self.torch.__version__} has no {missing}",
                                    advice="the memory shown is read from the nodes' saved attributes")
                return
            from .exact_memory import MODE, ExactMemory

            self.exact = ExactMemory(self)
            self._saved = self.exact.saved  # exact memory: what each node saved comes from its packs
            self.builder.engine("torch", memory=MODE)

    # ----- lifecycle ------------------------------------------------------------------------------------
    def attach(self):
        if self.attached:
            return
        torch = self.torch
        set_torch_dir(os.path.dirname(torch.__file__))
        self._start_seq[threading.get_ident()] = torch_patches.next_sequence_nr(torch)
        self.attached = True
        torch_patches.install(self)
        torch_rpc.install(self)  # calls served over RPC, dist_autograd.backward
        self.training_watch.install()
        self.optimizer_watch.install()
        if self.exact is not None:  # exact memory: our saved-tensor hooks on this thread
            self.exact.install()
        self._froze = _freeze_heap()
        self._thresholds = _collect_less()
        schedule = getattr(self.builder, "schedule", None)  # (a builder stand-in may have none: all full)
        self.light_steps.enabled = schedule is not None and schedule.light
        if self.light_steps.enabled and not self.builder.starts_full():
            self.light_steps.enter()

    def detach(self):
        torch_patches.remove_left_behind(self)  # stopped from another thread earlier: this thread's mode goes now
        if self.exact is not None:  # exact memory: likewise our saved-tensor hooks on this thread
            self.exact.leave_thread()
        if self.attached:
            self.attached = False
            self.light_steps.on = self.light_steps.pop_later = False
            self.light_steps.restore()
            torch_patches.uninstall(self)
            torch_rpc.uninstall(self)
            self.training_watch.uninstall()
            self.optimizer_watch.uninstall()
            if self.exact is not None:  # exact memory
                self.exact.uninstall()
            with self.lock:
                self.checks.flush()
            if self._froze:
                gc.unfreeze()
                self._froze = False
            _collect_as_before(self._thresholds)
            self._thresholds = None

    def finish(self, frame):
        """The trace stops: name what the user's frame binds, and note what the live tensors are now."""
        with self.lock:
            self.name_from_frame(frame)
            self.refresh()

    def is_graph_output(self, value):
        """Whether ``value`` is a tensor with a graph behind it (what keeps that graph alive)."""
        return isinstance(value, self._Tensor) and tg.grad_fn_of(value) is not None

    def refresh(self, requires_grad=True):
        state = self.builder.variable_state
        for key, rec in list(self.builder.live_variables.items()):
            ref = rec.handle
            t = ref() if isinstance(ref, _Ref) else None
            if t is not None:
                state(key, requires_grad=bool(t.requires_grad) if requires_grad else None)

    def raised(self, exc, tb):
        found = None
        from .frames import is_internal

        while tb is not None:
            if not is_internal(tb.tb_frame.f_code):
                found = location_at(tb.tb_frame.f_code, tb.tb_lineno)
            tb = tb.tb_next
        self.builder.raised(type(exc).__name__, str(exc).split("\n")[0], found)

    def key_for_variable(self, obj):
        return self.var(obj) if isinstance(obj, self._Tensor) else None

    def key_for_node(self, obj):
        if hasattr(obj, "next_functions") and hasattr(obj, "metadata") and hasattr(obj, "register_prehook"):
            return self.node_key(obj, None)
        return None

    # ----- identity -----------------------------------------------------------------------------------------
    def var(self, t):
        """The key of tensor ``t``, reporting it first if we have not seen it (made before the trace, or by a
        path no handler saw): a parameter, or ``external``."""
        key = id(t)
        if key in self.builder.live_variables:
            return key
        origin = "parameter" if isinstance(t, self._Parameter) else "external"
        node = tg.grad_fn_of(t)
        nkey = None if node is None else self.node_key(node, None)
        if nkey is not None and nkey not in self.builder.live_nodes:
            nkey = None  # an in-place op's target first seen now (made on a light iteration): its node is that op's
        rec = self.new_var(t, origin, None, node=nkey, module=())
        if origin == "external" and rec is not None and getattr(rec, "name", None) is None and t._base is not None:
            # a view made where no graph was recorded (``x.transpose(1, 0)`` of a batch that needs no gradient)
            base = self.builder.live_variables.get(id(t._base))
            if base is not None and getattr(base, "name", None):
                self.builder.name_variables({key: f"view of {base.name}"})
        return key

    def new_var(self, t, origin, location, node=None, module=None):
        key = id(t)
        ref = _Ref(t, self._var_gone)
        ref.key = key
        name = self.names.parameter_path(t) if self.names.param_names else None
        return self.builder.variable(
            key, origin, tuple(t.shape), dtype_name(t.dtype), _nbytes(t), bool(t.requires_grad), location,
            node=node, name=name, grad_mode=self.torch.is_grad_enabled(), module=module, device=self.device(t),
            is_parameter=name is not None or isinstance(t, self._Parameter), handle=ref)

    def output(self, t, is_leaf):
        """The ``OutputFact`` of ``t`` (built by ``tuple.__new__``: no namedtuple constructor frame per op)."""
        ref = _Ref(t, self._var_gone)
        ref.key = key = id(t)
        try:
            nbytes = t.nbytes
        except RuntimeError:
            nbytes = 0
        dtype = t.dtype
        name = _dtype_names.get(dtype)  # (dtype_name, inline: once per output)
        return _fact(OutputFact, (key, tuple(t.shape), dtype_name(dtype) if name is None else name, nbytes,
                                  t.requires_grad, is_leaf, None,
                                  "cpu" if t.is_cpu and self._cpu_seen else self.device(t), ref))

    def device(self, t):
        if t.is_cpu and self._cpu_seen:  # the usual case, without building a torch.device
            return "cpu"
        device = t.device
        name = "cpu" if device.type == "cpu" else str(device)
        if name not in self._devices:
            self._devices.add(name)
            self._cpu_seen = self._cpu_seen or name == "cpu"
            self.builder.device("torch", name)
        return name

    def node_key(self, node, location, **op_facts):
        """The key of ``node``, reporting it (and every unknown node it reaches) first."""
        tag = node.metadata.get(tg.KEY)
        if tag is not None and tag.owner is self:
            return tag.id
        self._report_nodes(node, location, op_facts)
        return node.metadata[tg.KEY].id

    def _tag(self, node):
        tag = _new_tag(NodeTag)  # NodeTag(key, self), without a Python __init__ frame
        tag.id = next(self._keys)
        tag.owner = self
        tag.leaf = tag.spans = None
        node.metadata[_KEY] = tag
        ref = _Ref(tag, self._node_gone)
        ref.key = tag.id
        return tag, ref

    # ----- nodes ------------------------------------------------------------------------------------------
    def _report_nodes(self, root, location, op_facts):
        """Report ``root`` and the unknown nodes it reaches, inputs first. Nodes built before the trace started
        are ``external``; the others were built by the op being reported (``op_facts``: its tensor arguments,
        outputs and call instruction): one op can build several (``F.cross_entropy``)."""
        start = self._start_seq.get(threading.get_ident(), -1) if self._start_seq else -1
        nodes = tg.new_nodes(root, self)
        try:
            self._report_each(nodes, root, location, op_facts, start)
        finally:
            self._arguments = None  # (it holds the call's tensors)

    def _report_each(self, nodes, root, location, op_facts, start):
        for i, node in enumerate(nodes):
            info = tg.info(node)
            if info.accumulator:
                self._accumulator(node)
            elif location is None or (0 <= node._sequence_nr() < start and info.name != "RecvRpcBackward"):
                # (RPC's threads make a RecvRpcBackward: its number is theirs, not comparable with this thread's)
                self._external(node, info)
            elif len(nodes) > 1 and op_facts:
                # one call building several nodes (linear: t() of the weight, the matmul, the bias add) may
                # start several graphs from one call site: each gets its own site, or the builder would take
                # the second for a loop's next iteration
                facts = dict(op_facts, lasti=(op_facts.get("lasti", -1), i))
                self._op_node(node, info, node is root, location, **facts)
            else:
                self._op_node(node, info, node is root, location, **op_facts)

    def _edges(self, node):
        edges = []
        for child, nr in node.next_functions:
            if child is None:
                edges.append(None)
                continue
            tag = child.metadata.get(tg.KEY)
            if tag is not None and tag.owner is self:
                edges.append((tag.id, LEAF) if tag.leaf is not None else (tag.id, nr))
            elif tg.info(child).accumulator:
                edges.append((self._accumulator(child), LEAF))
            else:
                edges.append((self.node_key(child, None), nr))
        return edges

    def _accumulator(self, node):
        """A leaf's AccumulateGrad: the edge ``(leaf key, LEAF)``. Tagged once, with a post hook that sees the
        gradient accumulated and the ``.grad`` backward made."""
        leaf = node.variable
        key = self.var(leaf)
        tag = node.metadata.get(tg.KEY)
        if tag is None or tag.owner is not self:
            tag = tg.NodeTag(key, self)
            tag.leaf = weakref.ref(leaf)
            node.metadata[tg.KEY] = tag
            node.register_hook(torch_patches.AccumulatorHook(tag))
        return key

    def _external(self, node, info):
        tag, ref = self._tag(node)
        shape, dtype = tg.output_meta(node)
        module = ()
        if self.owners:  # a snapshot given the model: the module owning a parameter the node uses
            for child, _ in node.next_functions:
                if child is not None and tg.info(child).accumulator:
                    module = self.owners.get(id(child.variable), ())
                    if module:
                        break
        self.builder.external_node(tag.id, info.name, info.class_name, info.custom, shape=shape, dtype=dtype,
                                   handle=ref, module=module)
        self.builder.node_inputs(tag.id, self._edges(node))
        saved = self._saved(node, info, (), tag)
        if saved:
            self.builder.node_saved(tag.id, saved, freed=tg.is_freed(node))
        node.register_prehook(tag)

    def _op_node(self, node, info, is_root, location, tensors=(), outputs=(), lasti=-1, checks=None):
        edges = self._edges(node)
        tag, ref = self._tag(node)
        try:
            self._op_facts(node, info, is_root, location, tensors, outputs, lasti, checks, edges, tag, ref)
        except BaseException:
            _untag(node)
            raise

    def _op_facts(self, node, info, is_root, location, tensors, outputs, lasti, checks, edges, tag, ref):
        in_keys = self._input_keys(edges, tensors, is_root)
        outs = []
        live = self.builder.live_variables
        for o in outputs:
            if id(o) in live:  # an in-place op's target: the in-place fact re-points it
                continue
            fn = tg.grad_fn_of(o)
            mine = fn is not None and fn.metadata.get(tg.KEY) is tag
            if mine or is_root:
                outs.append(self.output(o, not mine))
        hidden = None
        if is_root and outs and checks is not None:
            checks.add(tag.id, outputs[0])
        if not outs:
            # a value that never reached Python as its own tensor: the log_softmax inside cross_entropy, or an
            # in-place op's result before it was written into its target (gradviz's engine records that too)
            shape, dtype = tg.output_meta(node)
            hidden = ("value", tag.id)
            nbytes = 0 if dtype is None else _numel(shape) * _itemsize(self.torch, dtype)
            outs.append(_fact(OutputFact, (hidden, shape, dtype or "", nbytes, True, False, None, None, None)))
        saved = self._saved(node, info, tensors, tag) if info.saved or self.exact else ()  # (exact: every node)
        if saved and not hidden:
            saved = _saved_outputs_named(saved, [o for o in outputs if id(o) in live or
                                                 any(f[0] == id(o) for f in outs)])
        self.builder.op(tag.id, info.name, info.class_name, info.custom, edges, in_keys, outs, saved, location,
                        lasti=lasti, handle=ref, meta=op_meta(node, info.name))
        if hidden is not None:
            self.builder.variable_died(hidden)
        node.register_prehook(tag)

    def _input_keys(self, edges, tensors, is_root):
        """The node's ``input_variables``, lined up with its ``edges`` (None for an input no argument gave, as
        ``bias=None``). The root node of a call lists the arguments that feed none of its inputs after them (an
        index, a running mean); an inner node of one call (``F.cross_entropy``'s NLL after its log-softmax) only
        the arguments that feed it."""
        live = self.builder.live_variables
        var = self.var
        if is_root:
            if len(tensors) == len(edges) and _lined_up(self, edges, tensors):
                return [id(t) if id(t) in live else var(t) for t in tensors]  # one argument per input, in order
            extra = self._in_order(edges, tensors)
            if extra is not None:
                return [id(t) if id(t) in live else var(t) for t in tensors] + [None] * extra
        known = self._arguments
        if known is not None and known[0] is tensors:  # the next node of the same call (MHA builds thirty)
            unique, own = known[1], known[2]
        else:
            unique, seen = [], set()
            for t in tensors:  # q, k and v of self-attention are one tensor: one argument, fed to any of them
                if id(t) not in seen:
                    seen.add(id(t))
                    unique.append(t)
            own = [_edge_of(self, t) for t in unique]
            self._arguments = (tensors, unique, own)
        fed, rest = tg.align_inputs(edges, own, is_root)
        keys = []
        for j in fed:  # (var's known case inline, in a loop: no frame per argument)
            if j is None:
                keys.append(None)
            else:
                k = id(unique[j])
                keys.append(k if k in live else var(unique[j]))
        if is_root:
            for j in rest:
                k = id(unique[j])
                keys.append(k if k in live else var(unique[j]))
        return keys

    def _in_order(self, edges, tensors):
        """For a root node whose inputs are its arguments in order, each the argument's own edge, then either
        inputs no argument gave (``y * 2``: the scalar's None) or arguments that feed none (``gather``'s index,
        each once, none needing grad): how many trailing inputs no argument gave. None for any other call (the
        alignment decides). Both cases are what ``align_inputs`` finds for them, without its bookkeeping."""
        n = len(edges)
        extra = n - len(tensors)
        if extra > 0:
            for edge in edges[len(tensors):]:
                if edge is not None:
                    return None
        elif extra < 0:
            tail = tensors[n:]
            for t in tail:
                if t.requires_grad:
                    return None
            if len(tail) > 1 and len({id(t) for t in tail}) < len(tail):
                return None
            extra = 0
        for edge, t in zip(edges, tensors):
            if edge is None or edge != _edge_of(self, t):
                return None
        return extra

    def _saved(self, node, info, tensors, tag=None):
        """``SavedFact``s for what ``node`` saved: a saved tensor whose
        storage is an argument's is that argument (its memory is not charged when the argument is a leaf that
        requires grad: a parameter's storage belongs to the model); each block of memory is keyed by (device,
        storage address), which is also the key of its version counter and of the memory (``storage``) in the
        facts. ``tag.spans`` gets the bytes each saved tensor spans, in the facts' order, for silent in-place
        writes (``TorchEvents.inplace``) and numpy hand-outs."""
        facts = []
        spans = []
        args = None
        live = self.builder.live_variables
        cpu_seen = self._cpu_seen
        Tensor = self._Tensor
        read = tg.read_saved  # this torch's way (torch/compat): SavedTensor.data, or unpacking _saved_*
        if self._unpack_hooked is not None and self._unpack_hooked():
            # an unpacking read would run a saved_tensors_hooks pair's unpack (the user's code) and see its
            # result, not what the node holds
            self.builder.unseen("not-measured", "saved-tensor memory", how=f"torch {self.torch.__version__}: "
                                "nodes built under saved_tensors_hooks (SavedTensor has no data access)")
            if tag is not None:
                tag.spans = None
            return facts
        for attr in info.saved:
            found = read(node, attr)
            if found is None:
                continue
            kind = "output" if "result" in attr else "input"
            for index, t in found:
                if not isinstance(t, Tensor):  # freed (None), or what a saved_tensors_hooks pack kept instead
                    continue  # (checkpoint's placeholder): no memory of the tensor's is held here
                try:
                    storage = t.untyped_storage()
                except (NotImplementedError, RuntimeError):  # no storage of its own (torch.func's wrappers)
                    continue
                address = storage.data_ptr()
                if t.is_cpu:  # (tg.storage_key, inline)
                    counter = ("cpu", -1, address)
                    device = "cpu" if cpu_seen else self.device(t)
                else:
                    counter = (t.device.type, t.get_device(), address)
                    device = self.device(t)
                block = counter
                vkey = None
                if kind == "input":
                    if args is None:
                        args = []
                        for a in tensors:  # (a loop, not a comprehension: no extra frame per op)
                            args.append((a.untyped_storage().data_ptr(), a))
                    for ptr, a in args:
                        if ptr == address and (a.is_cpu if counter[0] == "cpu" else a.device.type == counter[0]):
                            vkey = id(a) if id(a) in live else self.var(a)
                            base = a._base  # (_is_parameter_storage, inline)
                            if base is None:
                                base = a
                            if base.is_leaf and base.requires_grad:
                                block = None
                            break
                try:
                    nbytes = t.nbytes
                except RuntimeError:
                    nbytes = 0
                facts.append(_fact(SavedFact, (vkey, kind, index, tuple(t.shape), nbytes, t._version, counter, block,
                                               storage.nbytes(), device, counter)))
                first = t.data_ptr()
                spans.append((counter, first, first + nbytes if t.is_contiguous() else tg.span(t)[1]))
        if tag is not None:
            tag.spans = tuple(spans) or None  # a tuple of atoms: the collector stops tracking it
        return facts

    # ----- forward ------------------------------------------------------------------------------------------
    def op(self, func, args, kwargs):
        """Any other call of the Python API: run it, then report what it built or changed."""
        Tensor = self._Tensor
        tensors = []
        for a in args:
            if isinstance(a, Tensor):
                tensors.append(a)
            elif type(a) is list or type(a) is tuple:
                tensors.extend([x for x in a if isinstance(x, Tensor)])
        if kwargs:  # (F.layer_norm passes its weight and bias by keyword)
            for value in kwargs.values():
                if isinstance(value, Tensor):
                    tensors.append(value)
                elif isinstance(value, (list, tuple)):
                    tensors.extend([x for x in value if isinstance(x, Tensor)])
        before = []  # (a loop, not a comprehension: no extra frame per op)
        try:
            for t in tensors:
                before.append(t._version)
        except RuntimeError:  # an inference tensor has no version counter
            before = None
        result = func(*args, **kwargs)
        if type(result) is Tensor and tensors and before is not None:
            # plain data (a REINFORCE episode's returns and comparisons: half of its calls): no argument requiring
            # grad, none changed in place, a result without a node; _after_op would report nothing, so neither the
            # lock nor it is taken
            i = 0
            for t in tensors:  # (loops, not helpers: no frame per call)
                if t.requires_grad or t._version != before[i]:
                    break
                i += 1
            else:
                try:
                    if result.grad_fn is None:
                        return result
                except RuntimeError:  # (see tg.grad_fn_of)
                    pass
        elif type(result) in self._no_tensor:
            # no tensor out (a REINFORCE episode's size(), dim() and bool() calls): _after_op reports only an
            # argument changed in place, so without one neither the lock nor it is taken
            if before is None:
                return result
            i = 0
            for t in tensors:
                if t._version != before[i]:
                    break
                i += 1
            else:
                return result
        builder, tls = self.builder, self.tls
        builder.acquire()  # ``with self.lock``, inline: this runs for every op
        tls.quiet += 1
        try:
            self._after_op(func, args, tensors, before, result)
        except Exception as exc:  # our bookkeeping, never the script's problem
            self.internal_error("op", exc)
        finally:
            tls.quiet -= 1
            builder.release()
        return result

    def _after_op(self, func, args, tensors, before, result):
        Tensor = self._Tensor
        if type(result) is Tensor:
            for t in tensors:
                if result is t:  # an in-place op's target: the general path
                    break
            else:
                try:
                    fn = result.grad_fn
                except RuntimeError:  # (see tg.grad_fn_of)
                    fn = None
                if fn is not None and fn.metadata.get(tg.KEY) is None and self._usual_op(fn, tensors, result, before):
                    return
            outs = (result,)
        elif isinstance(result, Tensor):
            outs = (result,)
        elif isinstance(result, (tuple, list)):
            outs = tuple([x for x in result if isinstance(x, Tensor)])
        else:
            outs = ()
        changed = []
        if before is not None:  # (a loop, not a comprehension: no extra frame per op)
            for i, t in enumerate(tensors):
                if t._version != before[i]:
                    changed.append(i)
        roots = []
        for o in outs:
            try:
                fn = o.grad_fn  # (tg.grad_fn_of, inline: once per output of every call)
            except RuntimeError:
                fn = None
            if fn is not None:
                tag = fn.metadata.get(tg.KEY)
                if tag is None or tag.owner is not self:
                    roots.append(fn)
        for i in changed:
            fn = tg.grad_fn_of(tensors[i])
            if fn is not None and fn not in roots:
                tag = fn.metadata.get(tg.KEY)
                if tag is None or tag.owner is not self:
                    roots.append(fn)
        if not (roots or changed):
            if not outs:  # a number, a size, a bool (t.size(0), t.dim(), t.data_ptr()): nothing to report, no walk
                return
            for t in tensors:
                if t.requires_grad:
                    break
            else:
                if not tensors:
                    self.created(func, args, outs)
                return
        frame, site = where(2)  # (this frame and op's)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        if roots:
            facts = {"tensors": tensors, "outputs": outs, "lasti": site,
                     "checks": self.checks}
            for fn in roots:
                self.node_key(fn, location, **facts)
        elif outs and not changed:
            self.unrecorded(func, tensors, outs, location)
        for i in changed:  # (a tuple site: torch's own Python code made the write, as gradcheck's perturbations)
            self.inplace(func, tensors[i], before[i], location, args, internal=type(site) is tuple)

    def _usual_op(self, fn, tensors, out, before):
        """The usual op, in one go: one new node (every input a known node, a leaf's accumulator or nothing), one
        output, no argument changed in place, built after the trace started. Returns False (nothing reported)
        when the op is anything else, for the general path."""
        if before:
            for t, v in zip(tensors, before):
                if t._version != v:
                    return False
        edges = []
        for child, nr in fn.next_functions:
            if child is None:
                edges.append(None)
                continue
            tag = child.metadata.get(tg.KEY)
            if tag is None or tag.owner is not self:
                if type(child).__name__ != "AccumulateGrad":
                    return False
                edges.append((self._accumulator(child), LEAF))
            elif tag.leaf is not None:
                edges.append((tag.id, LEAF))
            else:
                edges.append((tag.id, nr))
        info = _INFOS.get(type(fn)) or tg.info(fn)
        start = self._start_seq
        if start and 0 <= fn._sequence_nr() < start.get(_get_ident(), -1):
            return False  # built before the trace: an external node
        frame, site = where(3)  # (this frame, _after_op's and op's)
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        tag = _new_tag(NodeTag)  # NodeTag(key, self), without a Python __init__ frame
        tag.id = key = next(self._keys)
        tag.owner = self
        tag.leaf = tag.spans = None
        fn.metadata[_KEY] = tag
        ref = _Ref(tag, self._node_gone)
        ref.key = key
        try:
            if len(tensors) == len(edges) and _lined_up(self, edges, tensors):
                live = self.builder.live_variables
                in_keys = []
                for t in tensors:
                    k = id(t)
                    in_keys.append(k if k in live else self.var(t))
            else:  # a bias=None, an index argument: find which argument feeds which input
                in_keys = self._input_keys(edges, tensors, True)
                self._arguments = None  # (it holds the call's tensors: they would outlive the call)
            saved = self._saved(fn, info, tensors, tag) if info.saved or self.exact else ()  # (exact: every node)
            if saved:
                saved = _saved_outputs_named(saved, (out,))
            self.builder.op(key, info.name, info.class_name, info.custom, edges, in_keys,
                            (self.output(out, False),), saved, location, op_meta(fn, info.name), False, site, ref)
        except BaseException:
            _untag(fn)
            raise
        self.checks.add(key, out)
        fn.register_prehook(tag)
        return True

    def on_custom_function(self, cls, args, outputs, location, kwargs=None):
        """A ``torch.autograd.Function``'s ``apply`` ran. ``apply`` bypasses the function mode, so the patched
        ``Function.apply`` reports it here and its node gets this call's line, not its consumer's. This is the
        one place where custom Function calls are seen (``cls`` is the user's Function class; torch's own, such
        as a compiled region's, come here too), and where a user-defined Function's backward is checked
        numerically the first time it runs with given inputs (wrong-backward)."""
        Tensor = self._Tensor
        tensors = [a for a in args if isinstance(a, Tensor)]
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        outs = tuple([o for o in outs if isinstance(o, Tensor)])
        for o in outs:
            fn = tg.grad_fn_of(o)
            if fn is not None:
                key = self.node_key(fn, location, tensors=tensors, outputs=outs, lasti=-1, checks=self.checks)
                if tg.info(fn).custom:
                    self._check_backward(key, cls, args, kwargs or {}, location)
                break

    def _check_backward(self, key, cls, args, kwargs, location):
        """wrong-backward on PyTorch: the probes (``torch/probe``) run on copies, unobserved (this thread is
        quiet), and without the builder's lock (the user's code runs there)."""
        from ...backward_check import definition_line
        from .probe import run_check, signature

        sig = signature(self.torch, args, kwargs)
        builder = self.builder
        if not builder.wants_backward_check(f"{cls.__module__}.{cls.__qualname__}", sig):
            return
        builder.release()
        try:
            result = run_check(self.torch, cls, args, kwargs)
        finally:
            builder.acquire()
        code = getattr(cls.backward, "__code__", None)
        defined = None if code is None else location_at(code, definition_line(code))
        builder.backward_check(key, cls.__qualname__, sig, result, location, defined)

    def internal_error(self, where, exc):
        self.builder.internal_errors.append({"where": f"torch adapter: {where}", "type": type(exc).__name__,
                                             "message": str(exc).split("\n")[0]})

    # ----- a graph that already exists ---------------------------------------------------------------------
    def describe(self, tensor):
        """Report ``tensor`` and the graph behind it, for a snapshot (no trace running)."""
        key = self.var(tensor)
        fn = tg.grad_fn_of(tensor)
        if fn is not None:
            self.builder.existing_output(key, self.node_key(fn, None))


_INFOS = tg._infos  # node class -> NodeInfo (tg.info's cache, read inline on the usual op's path)
_KEY = tg.KEY
NodeTag = tg.NodeTag
_new_tag = NodeTag.__new__
_get_ident = threading.get_ident


def _freeze_heap():
    """Move what exists now (torch's ~10^5 objects, the program's) out of the collector's sight until detach.

    A trace keeps small records per op; enough of them trigger full collections, and each one walks every
    object in the process (over 100 ms with torch loaded): most of the tracing cost on long graphs. Frozen
    objects are not collected until detach (a cycle that became garbage before the trace started waits for
    it); everything made during the trace is collected as usual. Nothing happens when the collector is off
    or the program froze objects itself."""
    if not gc.isenabled() or gc.get_freeze_count():
        return False
    gc.freeze()
    return True


# while attached: the young generation collected every 2,000 allocations instead of 700, the middle one every 50
# young collections instead of 10 (CPython's defaults); see _collect_less
_TRACING_THRESHOLDS = (2000, 50)


def _collect_less():
    """Collect the young generations less often while attached; returns what to put back at detach (or None).

    Most of what a trace allocates lives as long as the trace (its records, node tags, weak references), so each
    young collection re-walks them to find nothing to free: about 10% of a long elementwise chain's traced time
    at CPython's thresholds (docs/performance.md). The oldest generation's threshold is left alone. Nothing
    changes when the collector is off or the thresholds are already higher."""
    if not gc.isenabled():
        return None
    before = gc.get_threshold()
    young, middle = max(before[0], _TRACING_THRESHOLDS[0]), max(before[1], _TRACING_THRESHOLDS[1])
    if (young, middle) == before[:2]:
        return None
    gc.set_threshold(young, middle, *before[2:])
    return before, gc.get_threshold()


def _collect_as_before(saved):
    """Put the thresholds back, unless the program changed them meanwhile (then its own setting stays)."""
    if saved is not None and gc.get_threshold() == saved[1]:
        gc.set_threshold(*saved[0])


def _untag(node):
    """Take our tag off a node whose report failed half-way (an internal error): met again, it is reported then,
    instead of being known by a key the builder never got."""
    try:
        del node.metadata[tg.KEY]
    except (KeyError, RuntimeError):
        pass


def _nbytes(t):
    try:
        return t.nbytes
    except RuntimeError:
        return 0


_itemsizes = {}  # "float32" -> 4


def _itemsize(torch, dtype_name):
    size = _itemsizes.get(dtype_name)
    if size is None:
        size = _itemsizes[dtype_name] = getattr(torch, dtype_name).itemsize
    return size


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _saved_outputs_named(facts, outputs):
    """``facts`` with each saved result that is one of the op's ``outputs`` (same memory, same shape: ReLU's,
    softmax's) pointing at that output's Variable, as a saved input points at its argument; a result the node
    keeps for itself (batch norm's batch mean) stays unnamed."""
    named = None
    for k, fact in enumerate(facts):
        if fact.variable is not None or fact.kind != "output" or fact.counter is None:  # (None: a checkpoint's)
            continue
        for o in outputs:
            if o.untyped_storage().data_ptr() == fact.counter[2] and tuple(o.shape) == fact.shape:
                if named is None:
                    named = list(facts)
                named[k] = fact._replace(variable=id(o))
                break
    return facts if named is None else named


def _lined_up(adapter, edges, tensors):
    """Whether each argument is the input at its position: the argument's own edge where it requires grad, none
    where not (an argument list with a keyword-passed weight or an index in it does not line up, nor does
    ``F.linear``'s (x, W, b), whose node takes (b, x, W's transpose))."""
    for edge, t in zip(edges, tensors):
        if edge is None:
            if t.requires_grad:
                return False
        elif edge != _edge_of(adapter, t):
            return False
    return True


def _edge_of(adapter, t):
    """The edge a node taking ``t`` has to it: ``(node key, output_nr)``, ``(leaf key, LEAF)``, or None when ``t``
    needs no gradient (or was made by a node we do not know)."""
    try:
        fn = t.grad_fn  # (tg.grad_fn_of and tg.tag_of, inline: once per argument of every call that built nodes)
    except RuntimeError:
        fn = None
    if fn is not None:
        tag = fn.metadata.get(_KEY)
        if tag is None or tag.owner is not adapter:
            return None
        return (tag.id, LEAF) if tag.leaf is not None else (tag.id, t.output_nr)
    return (id(t), LEAF) if t.requires_grad else None
