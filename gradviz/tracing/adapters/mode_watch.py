"""Training-mode facts (tracing/training_facts.py) for an engine's modules, on full and light iterations alike.
Each adapter builds one with its engine's classes: ``torch_watch(adapter)``, ``gradviz_watch(adapter)``.

- Each module call (the global module hook, full or light) is looked at only when the module is mode-dependent
  (dropout, batch norm: a per-class answer, cached): its ``training`` flag and grad mode are compared with its
  open run's, and only a change costs more (the user's line, the iteration, the module's path).
- Each backward closes the runs it went through.
- ``nn.Module.train`` is wrapped while the trace is attached: the outermost call (``model.eval()`` is
  ``model.train(False)``, which sets every submodule through ``train`` too) is a switch, with the user's line
  and the mode-dependent modules it set.
- A recurrent module's (RNN, LSTM, GRU and their cells) outputs are looked at after each call (a forward hook on
  the module, registered at its first call, a module-level function so that ``deepcopy`` and pickling of the
  module never reach the watch, removed at detach; not a global hook, which would send every module call of
  PyTorch's down ``_call_impl``'s slow path): a call whose state argument is an output of
  its own previous call, made before a backward and still attached to that graph, with grad on, is a hidden state
  carried across iterations without ``detach()`` (``carry``: the next backward reaches every earlier iteration
  through it).
- ``nn.Module.__setattr__`` is wrapped too, for one name: ``module.requires_grad = False`` sets a plain
  attribute and freezes nothing. The module is followed (weakly) until an optimizer step shows whether its
  parameters still train (freeze-ineffective) or were frozen after all.
- On PyTorch, parameters frozen with their gradient left set are followed too (``frozen_watch.py``): one an
  optimizer step still changes is freeze-ineffective's other half.
"""

import functools
import sys
import weakref

from ..frames import location_at

DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


def torch_watch(adapter):
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from .frozen_watch import FrozenWatch
    from .torch.frames import is_internal, user_frame

    torch = adapter.torch
    nn = torch.nn
    frozen = FrozenWatch(adapter, getattr(adapter.builder, "training", None), nn.Parameter,
                         torch._C.TensorBase.__dict__["requires_grad"],
                         register_optimizer_step_post_hook,
                         lambda: user_frame(0), is_internal, lambda f: location_at(f.f_code, f.f_lineno))
    return ModeWatch(adapter, nn.Module, (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm),
                     torch.is_grad_enabled, lambda: user_frame(0), is_internal, nn.functional,
                     recurrent=((nn.RNNBase, nn.RNNCellBase), torch.Tensor), frozen=frozen)


def gradviz_watch(adapter):
    from ...autograd.grad_mode import is_grad_enabled
    from ...autograd.variable import Variable
    from ...nn import functional
    from ...nn.module import Module
    from ...nn.modules.dropout import Dropout
    from ...nn.modules.normalization import _BatchNorm
    from ...nn.modules.rnn import RNNBase, RNNCellBase
    from ..frames import is_internal, user_frame

    return ModeWatch(adapter, Module, (Dropout, _BatchNorm), is_grad_enabled, lambda: user_frame(1), is_internal,
                     functional, recurrent=((RNNBase, RNNCellBase), Variable))


class ModeWatch:
    """``module_class``: the engine's ``nn.Module`` (its ``train`` is wrapped); ``bases``: the mode-dependent
    module classes; ``grad_enabled()``; ``find_frame()``: the innermost user frame; ``internal(code)``: whether a
    code object is the engine's or gradviz's; ``functional``: the engine's ``nn.functional``, whose dropout
    functions are wrapped while attached (a call with ``training`` left at its default, True, from the ``forward``
    of a module in eval mode: dropout-in-eval); ``recurrent``: (the recurrent module classes, the tensor class);
    ``frozen``: the engine's ``FrozenWatch``, or None."""

    def __init__(self, adapter, module_class, bases, grad_enabled, find_frame, internal, functional=None,
                 recurrent=((), None), frozen=None):
        self.adapter = adapter
        self.module_class = module_class
        self.grad_enabled = grad_enabled
        self.find_frame = find_frame
        self.internal = internal
        self.facts = getattr(adapter.builder, "training", None)  # (a builder stand-in may have none)
        self._bases = bases
        self.functional = functional
        self._dropouts = {}  # name -> the functional dropout it wraps, while installed
        self.kinds = {}  # module class -> True when its behaviour depends on ``training``, RECURRENT, or False
        self._refs = {}  # module key -> weak reference, for naming it when the document is made
        self._original = None
        self._setattr = None  # the engine's Module.__setattr__, while wrapped
        self._frozen = []  # (module weakref, location, iteration) of ``module.requires_grad = False`` not judged yet
        self._depth = 0
        self._recurrent, self._tensor = recurrent
        self._hooked = {}  # recurrent module key -> its own forward hook's handle, while attached
        self._outputs = {}  # recurrent module key -> (weak refs to its last call's outputs, order, iteration)
        self.frozen = frozen
        if self.facts is not None:
            self.facts.namer = self.path_of

    # ----- attach / detach --------------------------------------------------------------------------------
    def install(self):
        if self.facts is None or self._original is not None:
            return
        Module = self.module_class
        original = self._original = Module.train
        watch = self

        def train(module, mode=True):
            if watch._depth == 0 and watch._original is not None:
                try:
                    watch.switch(module, bool(mode))
                except Exception as exc:  # our bookkeeping, never the script's problem
                    watch.adapter.builder.internal_error("module.train", exc)
            watch._depth += 1
            try:
                return original(module, mode)
            finally:
                watch._depth -= 1

        Module.train = functools.wraps(original)(train)
        _WATCHES.append(self)
        self._wrap_setattr()
        if self.frozen is not None:
            self.frozen.install()
        for name in DROPOUTS:
            function = getattr(self.functional, name, None)
            if function is not None:
                self._dropouts[name] = function
                setattr(self.functional, name, self._wrap_dropout(name, function))

    def _wrap_setattr(self):
        original = self._setattr = self.module_class.__dict__.get("__setattr__")
        if original is None:
            return
        watch = self

        def __setattr__(module, name, value):
            if name == "requires_grad" and watch._original is not None:
                try:
                    watch.requires_grad_attribute(module, value)
                except Exception as exc:  # our bookkeeping, never the script's problem
                    watch.adapter.builder.internal_error("module.requires_grad", exc)
            return original(module, name, value)

        self.module_class.__setattr__ = functools.wraps(original)(__setattr__)

    def uninstall(self):
        if self._original is not None:
            self.module_class.train = self._original
            self._original = None
        if self._setattr is not None:
            self.module_class.__setattr__ = self._setattr
            self._setattr = None
        if self.frozen is not None:
            self.frozen.uninstall()
        for name, function in self._dropouts.items():
            setattr(self.functional, name, function)
        self._dropouts = {}
        for handle in self._hooked.values():
            handle.remove()
        self._hooked = {}
        if self in _WATCHES:
            _WATCHES.remove(self)
        self._outputs = {}

    # ----- facts ------------------------------------------------------------------------------------------
    def call(self, module):
        """A module call (full or light): cheap unless a mode-dependent module's mode or grad mode changed."""
        cls = type(module)
        kind = self.kinds.get(cls)
        if kind is None:
            kind = self.kinds[cls] = self._kind_of(cls)
        if not kind or self.facts is None:
            return
        if kind is RECURRENT:
            if id(module) not in self._hooked and self._original is not None:
                self._hooked[id(module)] = module.register_forward_hook(_recurrent_hook)
            return
        training = module.training
        grad = self.grad_enabled()
        entry = self.facts.modules.get(id(module))
        run = None if entry is None else entry.open
        if run is not None and run["training"] is training and run["grad"] is grad:
            run["count"] += 1
            return
        key = id(module)
        self._refs[key] = weakref.ref(module)
        builder = self.adapter.builder
        self.facts.call(key, self.adapter.names.known_path(module), cls.__name__, training, grad,
                        builder.current_iteration(), self._root_caller())

    def backward(self):
        if self.facts is not None:  # (every backward: the order of backward, zero_grad and step too)
            self.facts.backward(self.adapter.builder.current_iteration())

    def switch(self, module, mode):
        kinds = self.kinds
        touches = []
        for m in module.modules():
            cls = type(m)
            kind = kinds.get(cls)
            if kind is None:
                kind = kinds[cls] = self._kind_of(cls)
            if kind is True:
                touches.append(id(m))
                self._refs[id(m)] = weakref.ref(m)
        key = id(module)
        self._refs[key] = weakref.ref(module)
        frame = self.find_frame()
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        self.facts.switch(key, self.adapter.names.known_path(module), type(module).__name__,
                          "train" if mode else "eval", touches, self.adapter.builder.current_iteration(), location)

    def _kind_of(self, cls):
        """True: mode-dependent; RECURRENT: a recurrent module (its state may be carried); False: neither."""
        if issubclass(cls, self._bases):
            return True
        return RECURRENT if self._recurrent and issubclass(cls, self._recurrent) else False

    def _recurrent_exit(self, module, args, output):
        """A recurrent module's forward hook: its state arguments against its previous call's outputs."""
        if self._original is None:
            return
        try:
            key, facts = id(module), self.facts
            last = self._outputs.get(key)
            if last is not None and facts.backward_order > last[1] and self.grad_enabled():
                refs = [r() for r in last[0]]
                for t in self._tensors(args[1:]):
                    if any(t is r for r in refs) and t.grad_fn is not None:
                        self._carried(module, t, last[2])
                        break
            outputs = [weakref.ref(t) for t in self._tensors((output,)) if t.requires_grad]
            self._outputs[key] = (outputs, facts.order, self.adapter.builder.current_iteration())
        except Exception as exc:  # our bookkeeping, never the script's problem
            self.adapter.builder.internal_error("recurrent module", exc)

    def _tensors(self, values, depth=0):
        """The tensors in ``values``, nested tuples and lists two deep (an LSTM's ``(out, (h, c))``)."""
        for v in values:
            if isinstance(v, self._tensor):
                yield v
            elif isinstance(v, (tuple, list)) and depth < 2:
                yield from self._tensors(v, depth + 1)

    def _carried(self, module, tensor, made_iteration):
        frame = self._root_frame()
        location = None if frame is None else location_at(frame.f_code, frame.f_lineno)
        self._refs[id(module)] = weakref.ref(module)
        self.facts.carry(id(module), self.adapter.names.known_path(module), type(module).__name__,
                         None if frame is None else _name_in(frame, tensor),
                         self.adapter.builder.current_iteration(), made_iteration, location)

    def _wrap_dropout(self, name, original):
        watch = self
        module_class = self.module_class

        def dropout(input, *args, **kwargs):
            if len(args) < 2 and "training" not in kwargs and watch._original is not None:
                caller = sys._getframe(1)
                this = caller.f_locals.get("self") if "self" in caller.f_code.co_varnames[:1] else None
                if isinstance(this, module_class) and not this.training and not watch.internal(caller.f_code):
                    try:
                        watch.dropout_in_eval(name, this, caller)
                    except Exception as exc:  # our bookkeeping, never the script's problem
                        watch.adapter.builder.internal_error("dropout", exc)
            return original(input, *args, **kwargs)

        return functools.wraps(original)(dropout)  # (its name and module kept: the torch shim lists it by them)

    def dropout_in_eval(self, name, module, frame):
        """``F.<name>`` with its default ``training=True`` in the ``forward`` of ``module``, which is in eval
        mode: dropout runs at evaluation."""
        key = id(module)
        self._refs[key] = weakref.ref(module)
        location = location_at(frame.f_code, frame.f_lineno)
        self.facts.functional_dropout(name, key, self.adapter.names.known_path(module), type(module).__name__,
                                      self.grad_enabled(), self.adapter.builder.current_iteration(), location,
                                      self._root_caller())

    def requires_grad_attribute(self, module, value):
        """``module.requires_grad = value``: a plain attribute, unless the module's class defines one (a
        property of the user's: deliberate)."""
        if value or hasattr(type(module), "requires_grad") or len(self._frozen) >= 16:
            return
        frame = self.find_frame()
        if frame is None or self.internal(frame.f_code):
            return
        self._refs[id(module)] = weakref.ref(module)
        self._frozen.append((weakref.ref(module), location_at(frame.f_code, frame.f_lineno),
                             self.adapter.builder.current_iteration()))

    def stepped(self, optimizer, find_location):
        """An optimizer step: a module "frozen" by attribute whose parameters still have gradients that this
        optimizer holds is reported (they train); one whose parameters were frozen after all is dropped. Frozen
        parameters holding a gradient are copied, to be compared after the step (``FrozenWatch``)."""
        if self.frozen is not None and self._original is not None:
            self.frozen.before_step(optimizer, find_location)
        if not self._frozen or self.facts is None:
            return
        held = {id(p) for group in getattr(optimizer, "param_groups", ()) for p in group.get("params", ())}
        waiting = []
        for ref, location, iteration in self._frozen:
            module = ref()
            if module is None:
                continue
            named = list(module.named_parameters())
            training = [name for name, p in named if p.requires_grad and p.grad is not None and id(p) in held]
            if training:
                self.facts.freeze_ineffective(self.adapter.names.known_path(module), type(module).__name__,
                                              location, iteration, training, len(named), find_location(),
                                              self.adapter.builder.current_iteration())
            elif any(p.requires_grad for _, p in named):
                waiting.append((ref, location, iteration))  # not trained by this optimizer (yet)
        self._frozen = waiting

    def path_of(self, key):
        ref = self._refs.get(key)
        module = None if ref is None else ref()
        return None if module is None else self.adapter.names.known_path(module)

    def _root_caller(self):
        """The user's line that called the outermost module: the first user frame that is not a module's method
        (``forward`` of the user's own modules is skipped, so the line is the training loop's ``model(x)``)."""
        frame = self._root_frame()
        return None if frame is None else location_at(frame.f_code, frame.f_lineno)

    def _root_frame(self):
        frame = self.find_frame()
        last = frame
        while frame is not None:
            code = frame.f_code
            if not self.internal(code):
                this = frame.f_locals.get("self") if "self" in code.co_varnames[:1] else None
                if this is None or not hasattr(this, "_modules"):
                    return frame
                last = frame
            frame = frame.f_back
        return last


RECURRENT = "recurrent"  # (a kind: recurrent modules are watched for a carried state, not for their mode)
_WATCHES = []  # the attached watches (a module's own hook finds its watch here: it holds no reference to it)


def _recurrent_hook(module, args, output):
    for watch in _WATCHES:
        if id(module) in watch._hooked:
            watch._recurrent_exit(module, args, output)


def _name_in(frame, tensor):
    """The caller's name for ``tensor``, or for the tuple holding it (an LSTM's ``hidden = (h, c)``)."""
    for name, value in frame.f_locals.items():
        if value is tensor or isinstance(value, (tuple, list)) and any(v is tensor for v in value):
            return name
    return None
