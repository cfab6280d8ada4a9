"""Recurrent layers ``RNN``, ``LSTM``, ``GRU`` and their cells, with PyTorch's weight names, gate order (LSTM:
input, forget, cell, output; GRU: reset, update, new), shapes and initialisation.

The input projection of a whole sequence is one matmul per layer and direction; then a Python loop over time
steps does the recurrent part, so the graph shows every step: the recurrent matmul, then one node for the
gates' pointwise work (``LstmCell``/``GruCell``, forward and backward side by side; the Elman RNN uses the
engine's add and tanh/relu).
"""

import math
import numbers
import warnings

import numpy as np

from ...autograd.variable import Variable
from ...dtypes import as_dtype
from ...ops import indexing as _I
from ...ops import nn_recurrent as _R
from ...ops import shape as _S
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ..utils.rnn import PackedSequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ----- one time step: (projected input, state, recurrent weights) -> new state --------------------------------
# A state of None is the default all-zero initial state of a sequence longer than one step: its recurrent
# matmul is skipped (it would add only b_hh, and W_hh's gradient from it is 0, while later steps give W_hh
# one), which saves the work and keeps the step on the input's graph instead of starting a separate graph.
def _recurrent(h, w_hh, b_hh):
    if h is None:
        return b_hh
    return F.linear(h, w_hh, b_hh)


def _plus(a, b):
    return a if b is None else a + b


def _input_and_recurrent(xp, h, w_hh, b_hh):
    """``xp + h W_hh^T + b_hh`` with the projected input taken in first, so a given state that has no graph of its
    own (detached between chunks, or made with zeros) joins the input's graph. Started on its own, each layer's
    first recurrent matmul would begin a graph at the module's line, and the tracer reads a second graph begun
    at the same line as a new iteration."""
    if h is None:
        return _plus(xp, b_hh)
    return F.linear(h, w_hh, _plus(xp, b_hh))


def _rnn_step(activation):
    def step(xp, state, w_hh, b_hh, w_hr=None):
        h = _input_and_recurrent(xp, state, w_hh, b_hh)
        return h.tanh() if activation == "tanh" else h.relu()
    return step


def _lstm_step(xp, state, w_hh, b_hh, w_hr=None):
    h, c = state if state is not None else (None, None)
    gates = _input_and_recurrent(xp, h, w_hh, b_hh)
    h, c = _R.LstmCell.apply(gates, c)  # the gates' pointwise work, one node
    return (h if w_hr is None else F.linear(h, w_hr)), c  # proj_size: h is projected by W_hr


def _gru_step(xp, h, w_hh, b_hh, w_hr=None):
    return _R.GruCell.apply(xp, _recurrent(h, w_hh, b_hh), h)


def _step_for(mode):
    if mode == "LSTM":
        return _lstm_step
    if mode == "GRU":
        return _gru_step
    return _rnn_step("tanh" if mode == "RNN_TANH" else "relu")


def _hidden(state):
    return state[0] if isinstance(state, tuple) else state


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", UserWarning, stacklevel=3)
        _check_sizes(input_size, hidden_size, num_layers, bias, batch_first)
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        dtype = as_dtype(dtype) or np.dtype(np.float32)
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:2 if bidirectional else 1]:
                layer_input = input_size if layer == 0 else real_hidden * (2 if bidirectional else 1)
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for kind, shape in shapes:
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(np.empty(shape, dtype=dtype)))
                    self._flat_weights_names.append(name)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """A cuDNN memory-layout call in PyTorch; nothing to do on gradviz's engine."""

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        per = (4 if self.bias else 2) + (1 if self.proj_size > 0 else 0)
        flat = self._flat_weights
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def _weights(self, layer, direction):
        suffix = "_reverse" if direction else ""
        get = self._parameters.get
        return (get(f"weight_ih_l{layer}{suffix}"), get(f"weight_hh_l{layer}{suffix}"),
                get(f"bias_ih_l{layer}{suffix}"), get(f"bias_hh_l{layer}{suffix}"), get(f"weight_hr_l{layer}{suffix}"))

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        name = "LSTM" if self.mode == "LSTM" else ("GRU" if self.mode == "GRU" else "RNN")
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D "
                             + ("instead" if name == "LSTM" else "tensor instead"))
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1 if not self.batch_first else 0)
            if hx is not None:
                hx = _unbatch_hidden(hx, self.mode)
        elif hx is not None:
            _check_batched_hidden(hx, self.mode)
        if self.batch_first:
            input = input.transpose(0, 1)
        self._check_input(input)
        hx = self._initial_state(input, hx)
        output, final = self._run(input, hx)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(1 if not self.batch_first else 0)
            final = tuple(s.squeeze(1) for s in final) if isinstance(final, tuple) else final.squeeze(1)
        return output, final

    def _forward_packed(self, packed, hx):
        """A PackedSequence: run on its padded (T, B) grid in sorted order, each sequence's state frozen once it
        has ended (and, backwards, held at the initial state until it starts); then pack the output again."""
        rows = packed.layout()
        data = packed.data
        zero = Variable(np.zeros((1,) + tuple(data.shape[1:]), dtype=data.dtype))
        x = _S.cat([data, zero], 0)[np.where(rows < 0, data.shape[0], rows)]  # (T, B, features)
        self._check_input(x)
        if hx is not None:
            _check_batched_hidden(hx, self.mode)
            if packed.sorted_indices is not None:  # the caller's batch order -> the packed (sorted) order
                order = packed.sorted_indices._data
                hx = tuple(h[:, order] for h in hx) if self.mode == "LSTM" else hx[:, order]
        hx = self._initial_state(x, hx)
        output, final = self._run(x, hx, active=rows >= 0)
        time, slot = np.nonzero(rows >= 0)
        out = PackedSequence(output[time, slot], packed.batch_sizes, packed.sorted_indices,
                             packed.unsorted_indices)
        if packed.unsorted_indices is not None:
            order = packed.unsorted_indices._data
            final = tuple(h[:, order] for h in final) if self.mode == "LSTM" else final[:, order]
        return out, final

    def _check_input(self, input):
        weight = self._flat_weights[0]
        if input.dtype != weight.dtype:
            raise ValueError(f"RNN input dtype (torch.{input.dtype}) does not match weight dtype "
                             f"(torch.{weight.dtype}). Convert input: input.to(torch.{weight.dtype}), or convert "
                             f"model: model.to(torch.{input.dtype})")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.shape[-1]}")

    def _initial_state(self, input, hx):
        cell = (self.num_layers * (2 if self.bidirectional else 1), input.shape[1], self.hidden_size)
        expected = cell[:2] + (self.proj_size or self.hidden_size,)
        if hx is None:
            if input.shape[0] > 1:
                return None  # zeros: each layer's first step skips its recurrent term
            zeros = Variable(np.zeros(expected, dtype=input.dtype))  # one step: W_hh's gradient is zeros, not None
            return (zeros, Variable(np.zeros(cell, dtype=input.dtype))) if self.mode == "LSTM" else zeros
        if self.mode == "LSTM":
            for k, (h, size) in enumerate(zip(hx, (expected, cell))):
                if tuple(h.shape) != size:
                    raise RuntimeError(f"Expected hidden[{k}] size {size}, got {list(h.shape)}")
            return tuple(hx)
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected hidden size {expected}, got {list(hx.shape)}")
        return hx

    def _projections(self, x, layer, directions):
        """Every time step's input projection at once, per direction. An input with no graph (the data itself)
        is projected for both directions by one matmul with the two weights stacked: two separate ones would each
        begin a graph at the module's line, which the tracer reads as a new iteration."""
        weights = [self._weights(layer, direction)[0:3:2] for direction in range(directions)]
        if directions == 1 or x.requires_grad:
            return [F.linear(x, w_ih, b_ih) for w_ih, b_ih in weights]
        both = F.linear(x, _S.cat([w for w, _ in weights], 0))  # the stacking is the call's one graph start
        rows = weights[0][0].shape[0]
        halves = (both[..., :rows], both[..., rows:])
        return [_plus(half, b_ih) for half, (_, b_ih) in zip(halves, weights)]

    def _run(self, x, hx, active=None):
        """``active``: a (T, B) mask of the steps each sequence really has (packed input), or None."""
        step = _step_for(self.mode)
        directions = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            inputs = self._projections(x, layer, directions)
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                k = layer * directions + direction
                state = None if hx is None else ((hx[0][k], hx[1][k]) if self.mode == "LSTM" else hx[k])
                projected = inputs[direction]
                steps = [None] * x.shape[0]
                for t in (range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])):
                    new = step(projected[t], state, w_hh, b_hh, w_hr)
                    if active is not None and not active[t].all():
                        new = _keep_ended(active[t], new, state)
                    state = new
                    steps[t] = _hidden(state)
                outputs.append(_S.stack(steps, 0))
                finals.append(state)
            x = outputs[0] if directions == 1 else _S.cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        if self.mode == "LSTM":
            return x, (_S.stack([s[0] for s in finals], 0), _S.stack([s[1] for s in finals], 0))
        return x, _S.stack(finals, 0)

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text


def _keep_ended(running, new, old):
    """The new state where a sequence is still running, the old one (zeros if none yet) where it is not."""
    if isinstance(new, tuple):
        olds = (None, None) if old is None else old
        return tuple(_keep_ended(running, n, o) for n, o in zip(new, olds))
    mask = running[:, None]
    return _I.where(mask, new, np.zeros(1, dtype=new.dtype) if old is None else old)


def _check_sizes(input_size, hidden_size, num_layers, bias, batch_first):
    if not isinstance(bias, bool):
        raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
    if not isinstance(batch_first, bool):
        raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
    if not isinstance(input_size, int):
        raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
    if input_size <= 0:
        raise ValueError("input_size must be greater than zero")
    if not isinstance(hidden_size, int):
        raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
    if hidden_size <= 0:
        raise ValueError("hidden_size must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")


def _unbatch_hidden(hx, mode):
    if mode == "LSTM":
        if hx[0].ndim != 2 or hx[1].ndim != 2:
            raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                               f"({hx[0].ndim}-D, {hx[1].ndim}-D) tensors")
        return (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
    if hx.ndim != 2:
        raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.ndim}-D tensor")
    return hx.unsqueeze(1)


def _check_batched_hidden(hx, mode):
    if mode == "LSTM":
        if hx[0].ndim != 3 or hx[1].ndim != 3:
            raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                               f"({hx[0].ndim}-D, {hx[1].ndim}-D) tensors")
    elif hx.ndim != 3:
        raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.ndim}-D tensor")


class RNN(RNNBase):
    """Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self_nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self_nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self_nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{self_nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if self_nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = self_nonlinearity


class LSTM(RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ----- cells ---------------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        dtype = as_dtype(dtype) or np.dtype(np.float32)
        self.weight_ih = Parameter(np.empty((num_chunks * hidden_size, input_size), dtype=dtype))
        self.weight_hh = Parameter(np.empty((num_chunks * hidden_size, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(np.empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(np.empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text

    def _prepare(self, name, input, states):
        """Check shapes as PyTorch does; returns the batched input and states and whether to unbatch after."""
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for k, s in enumerate(states):
            if s is not None and s.ndim not in (1, 2):
                label = "hidden" if len(states) == 1 else f"hx[{k}]"
                raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {s.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected "
                               f"{self.input_size}")
        out = []
        for k, s in enumerate(states):
            if s is None:  # computed with zeros, as PyTorch does: a single step gives W_hh a zero gradient
                s = Variable(np.zeros((input.shape[0], self.hidden_size), dtype=input.dtype))
            elif not batched:
                s = s.unsqueeze(0)
            if s.shape[0] != input.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{k} batch size "
                                   f"{s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.shape[1]}, expected "
                                   f"{self.hidden_size}")
            out.append(s)
        return input, out, batched


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        x, (h,), batched = self._prepare("RNNCell", input, (hx,))
        h = _rnn_step(self.nonlinearity)(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                                         self.bias_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, dtype=dtype)

    def forward(self, input, hx=None):
        x, (h, c), batched = self._prepare("LSTMCell", input, (None, None) if hx is None else tuple(hx))
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), (h, c), self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, dtype=dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare("GRUCell", input, (hx,))
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
