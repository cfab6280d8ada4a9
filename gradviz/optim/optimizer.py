"""``Optimizer``: parameter groups, per-parameter state, ``zero_grad`` and ``step``, as in ``torch.optim``.

Updates work on the parameters' numpy arrays in place (no graph nodes), then bump each parameter's version
counter as PyTorch's in-place updates do: a graph that saved a parameter before ``step`` refuses to backward.
"""

import copy
from collections import defaultdict

import numpy as np

from ..autograd import grad_mode, observer
from ..autograd.variable import Variable
from ..errors import UnsupportedError
from ..nn.module import _clear_grad, torch_typename

_observers = observer._observers
_quiet = observer._quiet


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Variable):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {torch_typename(params)}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Variable):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Variable):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {torch_typename(p)}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter "
                                 f"{name}")
            group.setdefault(name, default)
        _refuse_unsupported(group)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        if _observers.get():
            with observer.quiet(self):
                self._zero_grads(set_to_none)
        else:
            self._zero_grads(set_to_none)
        self._notify("zero_grad")

    def _zero_grads(self, set_to_none):
        for group in self.param_groups:
            for p in group["params"]:
                _clear_grad(p, set_to_none)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with grad_mode.enable_grad():
                loss = closure()
        if _observers.get():  # observers see the updates as this optimizer's (on_parameter_update), not the user's
            with observer.quiet(self):
                for group in self.param_groups:
                    self._update_group(group)
        else:
            for group in self.param_groups:
                self._update_group(group)
        self._opt_called = True  # a scheduler stepped before any optimizer step warns, as in PyTorch
        self._notify("step")
        return loss

    def _update_group(self, group):
        raise NotImplementedError(f"{type(self).__name__} must implement _update_group(group)")

    def _notify(self, event):
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_optimizer(self, event)
                except Exception as failure:
                    o.callback_failed("on_optimizer", failure)

    # ----- state ------------------------------------------------------------------------------------
    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}, as in PyTorch."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, saved in zip(self.param_groups, groups):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        by_index = {}
        for mine, saved in zip(self.param_groups, groups):
            by_index.update(zip(saved["params"], mine["params"]))
        self.state = defaultdict(dict)
        for i, values in state_dict["state"].items():
            param = by_index.get(i)
            if param is not None:
                self.state[param] = {k: _copy_state(v, param, k) for k, v in values.items()}
        for mine, saved in zip(self.param_groups, groups):
            mine.update({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"})

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}"
            for key in sorted(k for k in group if k != "params"):
                text += f"\n    {key}: {group[key]}"
        return text + "\n)"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)


def _copy_state(value, param, key):
    """A state entry copied for this optimizer; floating tensors follow the parameter's dtype (not 'step')."""
    if isinstance(value, Variable):
        data = np.array(value._data, copy=True)
        if key != "step" and data.dtype.kind == "f":
            data = data.astype(param._data.dtype, copy=False)
        out = Variable.__new__(Variable)
        out._init(data)
        return out
    return copy.deepcopy(value)


def _refuse_unsupported(group):
    """PyTorch's performance and CUDA switches: accepted when off; gradviz has one CPU code path."""
    for flag in ("differentiable", "fused", "capturable"):
        if group.get(flag):
            raise UnsupportedError(f"gradviz's optimizers do not implement {flag}=True", torch_name=f"{flag}=True")


def state_tensor(array):
    """Wrap a numpy array as a state entry (PyTorch keeps optimizer state as tensors)."""
    v = Variable.__new__(Variable)
    v._init(array)
    return v


def scalar_step():
    """A fresh ``state["step"]``: a 0-dim tensor, float32 (float64 when that is the default dtype), as PyTorch."""
    from ..dtypes import default_float

    return state_tensor(np.zeros((), dtype=np.float64 if default_float() == np.float64 else np.float32))


def bump_version(param):
    """Record an in-place update of ``param`` (what PyTorch's ``add_`` on a parameter does), and tell observers:
    a graph that saved the old value can no longer backward."""
    old = param._vc.value
    param._vc.value = old + 1
    obs = _observers.get()
    if obs:
        owner = _quiet.get()  # observer.quiet_owner(), without the call: once per parameter per step
        optimizer = owner if isinstance(owner, Optimizer) else None
        for o in obs:
            try:
                o.on_parameter_update(optimizer, param, old, old + 1)
            except Exception as failure:
                o.callback_failed("on_parameter_update", failure)


def grads_with_decay(group):
    """Each parameter of ``group`` that has a gradient, with the gradient the update rule reads: negated under
    ``maximize``, plus L2 ``weight_decay * param`` (PyTorch's coupled decay; a new array, the grad is untouched)."""
    decay, maximize = float(group["weight_decay"]), group["maximize"]
    for p in group["params"]:
        if p._grad is None:
            continue
        g = -p._grad._data if maximize else p._grad._data
        if decay != 0:
            g = g + decay * p._data
        yield p, g
