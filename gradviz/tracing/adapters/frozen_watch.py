"""Frozen parameters that still change (freeze-ineffective's second half), on PyTorch.

An optimizer updates every parameter whose ``.grad`` is not None, whatever its ``requires_grad``. A parameter
frozen with its gradient left set (frozen after a backward, or with ``zero_grad(set_to_none=False)``, which
leaves zeros) is still moved: by the stale gradient, by momentum (SGD, Adam's running averages) or by weight
decay (AdamW). The watch:

- notes each ``requires_grad`` set to False on a parameter, with the user's line (``noted``), from the calls
  already watched: ``requires_grad_`` (which ``module.requires_grad_(False)`` calls for each parameter) by the
  light watch's wrapper on light iterations and by the mode's handler on full ones; the attribute
  (``p.requires_grad = False``), which nothing else sees on a light iteration, by the one patch made here: a
  ``property`` on ``nn.Parameter`` whose getter is the tensor's own C getter (a read runs no Python frame; the
  setter, rare, is Python). True again forgets it;
- at an optimizer step's start (``before_step``, light iterations included), looks only at the parameters noted
  frozen: those still frozen, holding a gradient and held by the stepping optimizer are copied;
- after the step (a global step post hook) compares the copies: a value that changed is reported, with the freeze's
  line and the step's. Nothing is copied while no frozen parameter holds a gradient (the correct freezes).
"""

import weakref

FROZEN_LIMIT = 4096  # frozen parameters followed
COPY_BYTES = 1 << 26  # the copies of one step's suspects, at most


def flag(base, note):
    """``nn.Parameter.requires_grad`` while attached: read by the tensor's own getter, each set noted."""
    put = base.__set__

    def set_requires_grad(param, value):
        put(param, value)
        note(param, value)

    return property(base.__get__, set_requires_grad, None, base.__doc__)


class FrozenWatch:
    """``parameter_class``: the engine's ``nn.Parameter``; ``base``: the tensor's ``requires_grad`` descriptor;
    ``register_post_hook``: the engine's global optimizer step post hook registration; ``find_frame()``: the
    innermost user frame; ``internal(code)``; ``where(frame)``: a frame's location."""

    def __init__(self, adapter, facts, parameter_class, base, register_post_hook, find_frame, internal, where):
        self.adapter = adapter
        self.facts = facts
        self.parameter_class = parameter_class
        self.base = base
        self.register_post_hook = register_post_hook
        self.find_frame = find_frame
        self.internal = internal
        self.where = where
        self.frozen = {}  # id(parameter) -> (weak ref, freeze location, iteration)
        self.copies = []  # (parameter, its copy, freeze location, iteration, gradient nonzero) for the step running
        self.step_location = None
        self._handle = None
        self._installed = False

    def install(self):
        if self._installed or self.facts is None:
            return
        self.parameter_class.requires_grad = flag(self.base, self.noted)
        self._handle = self.register_post_hook(self.after_step)
        self._installed = True

    def uninstall(self):
        if not self._installed:
            return
        cls = self.parameter_class
        if "requires_grad" in cls.__dict__:
            delattr(cls, "requires_grad")
        self._handle.remove()
        self._handle = None
        self._installed = False
        self.frozen = {}
        self.copies = []

    def noted(self, param, value):
        """``param.requires_grad`` set to ``value`` (the attribute or ``requires_grad_``); anything else that is
        not a parameter is ignored."""
        if not isinstance(param, self.parameter_class) or not self._installed:
            return
        try:
            if value:
                self.frozen.pop(id(param), None)
                return
            if len(self.frozen) >= FROZEN_LIMIT:
                return
            frame = self.find_frame()
            if frame is None or self.internal(frame.f_code):
                return
            self.frozen[id(param)] = (weakref.ref(param), self.where(frame),
                                      self.adapter.builder.current_iteration())
        except Exception as exc:  # our bookkeeping, never the script's problem
            self.adapter.builder.internal_error("requires_grad", exc)

    def before_step(self, optimizer, find_location):
        """An optimizer step starts: copy the frozen parameters it holds that hold a gradient."""
        if not self.frozen:
            return
        suspects = []
        self.copies = []
        with self.adapter.lock:  # (our own reads and copies: not the user's)
            for key, (ref, location, iteration) in list(self.frozen.items()):
                p = ref()
                if p is None or p.requires_grad:
                    del self.frozen[key]
                elif p.grad is not None:
                    suspects.append((p, location, iteration))
            if not suspects:
                return
            held = {id(p) for group in getattr(optimizer, "param_groups", ()) for p in group.get("params", ())}
            total = 0
            for p, location, iteration in suspects:
                total += p.numel() * p.element_size()
                if id(p) in held and total <= COPY_BYTES:
                    self.copies.append((p, p.detach().clone(), location, iteration, bool(p.grad.any())))
        if self.copies:
            self.step_location = find_location()

    def after_step(self, optimizer, args, kwargs):
        copies, self.copies = self.copies, []
        if not copies:
            return
        try:
            names = self.adapter.names
            moved = {}
            with self.adapter.lock:
                for p, copy, location, iteration, stale in copies:
                    if not p.detach().equal(copy):
                        moved.setdefault((location, iteration), []).append((names.parameter_path(p), stale))
            for (location, iteration), params in moved.items():
                self.facts.frozen_moved(location, iteration, [n for n, _ in params], any(s for _, s in params),
                                        type(optimizer).__name__, self.step_location,
                                        self.adapter.builder.current_iteration())
        except Exception as exc:  # our bookkeeping, never the script's problem
            self.adapter.builder.internal_error("frozen parameters", exc)
