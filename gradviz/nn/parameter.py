"""``Parameter``: a leaf Variable that a Module registers as one of its learnable tensors."""

import numpy as np

from ..autograd import observer
from ..autograd.variable import Variable, _to_array, format_variable

_observers = observer._observers


class Parameter(Variable):
    """A Variable that requires grad by default and that assigning to a Module attribute registers.

    Like PyTorch's, it shares memory (not history) with the tensor it is built from."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            array = np.zeros(0, dtype=np.float32)
        elif isinstance(data, Variable):
            array = data._data
        else:
            array = _to_array(data)
        self._init(array)
        if requires_grad:
            self.requires_grad = True  # the setter refuses integer dtypes with PyTorch's message
        obs = _observers.get()
        if obs:
            for o in obs:
                try:
                    o.on_variable(self, "parameter")
                except Exception as failure:
                    o.callback_failed("on_variable", failure)

    def __repr__(self):
        return "Parameter containing:\n" + format_variable(self)

    def __reduce_ex__(self, protocol):
        # copy.deepcopy / pickle: rebuild from a copy of the data, keeping requires_grad.
        return (_rebuild_parameter, (np.array(self._data, copy=True), self._requires_grad))


def _rebuild_parameter(array, requires_grad):
    return Parameter(array, requires_grad=requires_grad)
