"""Shape ops. View ops (``_view = True``) return numpy views, so the output shares storage and — through the
engine — the version counter of its input; each defines ``view(array, **params)`` so an in-place write through
a view can be replayed on a gradient (see ``CopySlices``)."""

import numpy as np

from ..autograd.function import Function
from ..autograd.variable import Variable
from ..dtypes import result_type
from ..errors import ShapeError


def _dim(dim, ndim):
    """Normalise a possibly negative dim, with PyTorch's error for one out of range."""
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim % max(ndim, 1)


class Reshape(Function):
    """``view``/``reshape``: a view when numpy can reshape without copying."""

    _raw = True
    _view = True

    @staticmethod
    def view(array, shape):
        return array.reshape(shape)

    @staticmethod
    def forward(ctx, x, shape):
        ctx._meta = {"shape": tuple(shape)}
        ctx._in_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx._in_shape)


def _resolve_shape(x, shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    size = x._data.size
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if (-1 in shape and (known == 0 or size % known)) or (-1 not in shape and known != size):
        raise ShapeError(f"shape '[{', '.join(str(s) for s in shape)}]' is invalid for input of size {size}")
    return shape


def view(x, shape):
    shape = _resolve_shape(x, shape)
    try:
        out = np.reshape(x._data, shape, copy=False)
    except ValueError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    del out
    return Reshape.apply(x, shape=shape)


def reshape(x, shape):
    return Reshape.apply(x, shape=_resolve_shape(x, shape))


def flatten(x, start_dim=0, end_dim=-1):
    nd = x._data.ndim
    if nd == 0:
        return Reshape.apply(x, shape=(1,))
    s, e = _dim(start_dim, nd), _dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x  # PyTorch returns the input itself when there is nothing to merge
    shape = x._data.shape
    return Reshape.apply(x, shape=shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:])


class Transpose(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dim0, dim1):
        return np.swapaxes(array, dim0, dim1)

    @staticmethod
    def forward(ctx, x, dim0, dim1):
        nd = x.ndim
        ctx._dims = (_dim(dim0, nd), _dim(dim1, nd))
        ctx._meta = {"dim0": dim0, "dim1": dim1}
        return np.swapaxes(x, dim0, dim1) if nd else x

    @staticmethod
    def backward(ctx, grad):
        d0, d1 = ctx._dims
        return np.swapaxes(grad, d0, d1) if grad.ndim else grad


class Permute(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dims):
        return np.transpose(array, dims)

    @staticmethod
    def forward(ctx, x, dims):
        if len(dims) != x.ndim:
            raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match "
                               f"the length of the desired ordering of dimensions i.e. input.dim() = {x.ndim} "
                               f"is not equal to len(dims) = {len(dims)}")
        dims = tuple(_dim(d, x.ndim) for d in dims)
        ctx._dims = dims
        ctx._meta = {"dims": dims}
        return np.transpose(x, dims)

    @staticmethod
    def backward(ctx, grad):
        return np.transpose(grad, np.argsort(ctx._dims))


class Squeeze(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dim):
        return _squeeze(array, dim)

    @staticmethod
    def forward(ctx, x, dim):
        ctx._in_shape = x.shape
        ctx._meta = {"dim": dim}
        return _squeeze(x, dim)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx._in_shape)


def _squeeze(array, dim):
    if dim is None:
        return np.squeeze(array)
    if array.ndim == 0:
        return array
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    dims = tuple(d for d in (_dim(d, array.ndim) for d in dims) if array.shape[d] == 1)
    return np.squeeze(array, axis=dims) if dims else array


class Unsqueeze(Function):
    _raw = True
    _view = True

    @staticmethod
    def view(array, dim):
        return np.expand_dims(array, _dim(dim, array.ndim + 1))

    @staticmethod
    def forward(ctx, x, dim):
        ctx._in_shape = x.shape
        ctx._meta = {"dim": dim}
        return np.expand_dims(x, _dim(dim, x.ndim + 1))

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx._in_shape)


class Expand(Function):
    """A broadcast view; backward sums over the expanded dims (the engine's unbroadcast)."""

    _raw = True
    _view = True

    @staticmethod
    def view(array, shape):
        return _broadcast_view(array, shape)

    @staticmethod
    def forward(ctx, x, shape):
        ctx._meta = {"shape": shape}
        return _broadcast_view(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return grad


def _broadcast_view(array, shape):
    """np.broadcast_to, but writable when the source is, as PyTorch's expand is: fill_/zero_ may write through it
    (every other in-place op refuses overlapping memory, in apply_inplace)."""
    if not array.flags.writeable:
        return np.broadcast_to(array, shape)
    lead = len(shape) - array.ndim
    strides = (0,) * lead + tuple(0 if have == 1 and want != 1 else st
                                  for have, want, st in zip(array.shape, shape[lead:], array.strides))
    return np.lib.stride_tricks.as_strided(array, shape=shape, strides=strides)


def expand(x, sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    shape = x._data.shape
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand(torch.FloatTensor{{[{', '.join(map(str, shape))}]}}, size=[{len(sizes)}]): "
                           "the number of sizes provided must be greater or equal to the number of dimensions "
                           "in the tensor")
    padded = (1,) * (len(sizes) - len(shape)) + shape
    target = []
    for want, have in zip(sizes, padded):
        want = int(want)
        if want == -1:
            want = have
        elif have != 1 and want != have:
            raise ShapeError(f"The expanded size of the tensor ({want}) must match the existing size ({have}) "
                             f"at non-singleton dimension {len(target)}.  Target sizes: {list(sizes)}.  Tensor "
                             f"sizes: {list(shape)}")
        target.append(want)
    return Expand.apply(x, shape=tuple(target))


class Clone(Function):
    """A copy; ``order="C"`` lays it out row-major (``contiguous()``), else the layout is kept, as PyTorch's
    ``clone`` preserves strides."""

    _raw = True

    @staticmethod
    def forward(ctx, x, order="K"):
        return np.array(x, copy=True, order=order)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Cat(Function):
    """``cat``: PyTorch's legacy rule included, a 1-D empty tensor joins anything (``torch.cat([torch.tensor([]),
    x])``, the accumulate-in-a-loop idiom); it still takes part in the dtype promotion."""

    _raw = True

    @staticmethod
    def forward(ctx, *xs, dim=0):
        arrays = [np.asarray(x) for x in xs]
        for i, a in enumerate(arrays):
            if a.ndim == 0:
                raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
        skipped = tuple(a.shape == (0,) for a in arrays)
        kept = [(i, a) for i, a in enumerate(arrays) if not skipped[i]] or list(enumerate(arrays))
        first = kept[0][1]
        nd = first.ndim
        d = _dim(dim, nd)
        for i, a in kept:
            if a.ndim != nd:
                raise ShapeError(f"Tensors must have same number of dimensions: got {nd} and {a.ndim}")
            for k, (want, got) in enumerate(zip(first.shape, a.shape)):
                if k != d and want != got:
                    raise ShapeError(f"Sizes of tensors must match except in dimension {d}. Expected size {want} "
                                     f"but got size {got} for tensor number {i} in the list.")
        sizes = [0 if skipped[i] and len(kept) < len(arrays) else a.shape[d] for i, a in enumerate(arrays)]
        ctx._cat = (np.cumsum(sizes)[:-1], d, skipped if len(kept) < len(arrays) else None)
        ctx._meta = {"dim": d}
        return np.concatenate([a for _, a in kept], axis=d, dtype=result_type(*arrays))

    @staticmethod
    def backward(ctx, grad):
        splits, d, skipped = ctx._cat
        pieces = np.split(grad, splits, axis=d)
        if skipped is None:
            return tuple(pieces)
        return tuple(np.zeros(0, dtype=grad.dtype) if skip else piece for piece, skip in zip(pieces, skipped))


class Stack(Function):
    _raw = True

    @staticmethod
    def forward(ctx, *xs, dim=0):
        arrays = [np.asarray(x) for x in xs]
        for i, a in enumerate(arrays):
            if a.shape != arrays[0].shape:
                raise ShapeError(f"stack expects each tensor to be equal size, but got {list(arrays[0].shape)} "
                                 f"at entry 0 and {list(a.shape)} at entry {i}")
        d = _dim(dim, arrays[0].ndim + 1)
        ctx._dim = d
        ctx._meta = {"dim": d}
        return np.stack(arrays, axis=d, dtype=result_type(*arrays))

    @staticmethod
    def backward(ctx, grad):
        return tuple(np.moveaxis(grad, ctx._dim, 0))


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    return Cat.apply(*tensors, dim=dim)


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    return Stack.apply(*tensors, dim=dim)



# ----- opsb: more views (narrow, split, chunk, unbind, movedim, unflatten, diagonal) -------------------------------
def _slicer(dim, index):
    """The numpy index that applies ``index`` (a slice or an int) to dim ``dim`` and keeps a view."""
    return (slice(None),) * dim + (index, Ellipsis)


class Narrow(Function):
    """``narrow``: rows ``start:start+length`` of one dim, a view (PyTorch's SliceBackward). ``piece`` numbers
    the outputs of ``split``/``chunk``, which build on it."""

    _raw = True
    _view = True
    _multi_view = None  # the name PyTorch gives an op returning several views (which refuses in-place writes)

    @staticmethod
    def view(array, dim, start, length, piece=0):
        return array[_slicer(dim, slice(start, start + length))]

    @staticmethod
    def forward(ctx, x, dim, start, length, piece=0):
        ctx._in = (x.shape, dim, start, length)
        ctx._meta = {"dim": dim, "start": start, "length": length}
        return x[_slicer(dim, slice(start, start + length))]

    @staticmethod
    def backward(ctx, grad):
        shape, dim, start, length = ctx._in
        out = np.zeros(shape, dtype=grad.dtype)
        out[_slicer(dim, slice(start, start + length))] = grad
        return out

    @classmethod
    def name(cls):
        return "SliceBackward"


class SplitPiece(Narrow):
    """One output of ``split``/``chunk``: a narrow view with PyTorch's node name."""

    _multi_view = "Split"

    @classmethod
    def name(cls):
        return "SplitBackward"


class SplitWithSizesPiece(Narrow):
    _multi_view = "SplitWithSizes"

    @classmethod
    def name(cls):
        return "SplitWithSizesBackward"


class Select(Function):
    """One output of ``unbind``: index ``index`` of dim ``dim``, a view with that dim removed."""

    _raw = True
    _view = True
    _multi_view = "Unbind"

    @staticmethod
    def view(array, dim, index, piece=0):
        return array[_slicer(dim, index)]

    @staticmethod
    def forward(ctx, x, dim, index, piece=0):
        ctx._in = (x.shape, dim, index)
        ctx._meta = {"dim": dim, "index": index}
        return x[_slicer(dim, index)]

    @staticmethod
    def backward(ctx, grad):
        shape, dim, index = ctx._in
        out = np.zeros(shape, dtype=grad.dtype)
        out[_slicer(dim, index)] = grad
        return out

    @classmethod
    def name(cls):
        return "UnbindBackward"


def narrow(x, dim, start, length):
    shape = x._data.shape
    d = _dim(dim, len(shape))
    start, length = int(start), int(length)
    if not -shape[d] <= start <= shape[d]:
        raise IndexError(f"start out of range (expected to be in range of [{-shape[d]}, {shape[d]}], but got "
                         f"{start})")
    if start < 0:
        start += shape[d]
    if start + length > shape[d]:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({shape[d]}).")
    return Narrow.apply(x, dim=d, start=start, length=length)


class Split(Function):
    """``split``/``chunk``: one node whose outputs are consecutive narrow views along ``dim`` (as PyTorch's
    SplitBackward); backward puts each output's gradient back in its place (zeros for unused pieces)."""

    _raw = True
    _view = True
    _piece = SplitPiece

    @classmethod
    def output_view(cls, i, kwargs):
        return cls._piece, {"dim": kwargs["dim"], "start": kwargs["starts"][i], "length": kwargs["lengths"][i],
                            "piece": i}

    @staticmethod
    def forward(ctx, x, dim, starts, lengths):
        ctx._in = (x.shape, dim, starts, lengths)
        ctx._meta = {"dim": dim, "sizes": list(lengths)}
        return tuple(x[_slicer(dim, slice(s, s + n))] for s, n in zip(starts, lengths))

    @staticmethod
    def backward(ctx, *grads):
        shape, dim, starts, lengths = ctx._in
        if len(grads) > 1 and all(g.shape[dim] == n for g, n in zip(grads, lengths)):
            return np.concatenate(grads, axis=dim)
        out = np.zeros(shape, dtype=grads[0].dtype)
        for g, s, n in zip(grads, starts, lengths):
            out[_slicer(dim, slice(s, s + n))] = g
        return out


class SplitWithSizes(Split):
    _piece = SplitWithSizesPiece


class Unbind(Function):
    """``unbind``: one node whose outputs are the slices along ``dim``, each a view without that dim."""

    _raw = True
    _view = True

    @staticmethod
    def output_view(i, kwargs):
        return Select, {"dim": kwargs["dim"], "index": i, "piece": i}

    @staticmethod
    def forward(ctx, x, dim):
        ctx._dim = dim
        ctx._meta = {"dim": dim}
        return tuple(x[_slicer(dim, i)] for i in range(x.shape[dim]))

    @staticmethod
    def backward(ctx, *grads):
        return np.stack(grads, axis=ctx._dim)


def split(x, split_size_or_sections, dim=0):
    shape = x._data.shape
    d = _dim(dim, len(shape))
    size = shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                               f"size at dimension {d}), but got split_sizes={sizes}")
        op = SplitWithSizes
    else:
        step = int(split_size_or_sections)
        if step < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
        if step == 0 and size != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        sizes = [min(step, size - start) for start in range(0, size, step)] if step and size else [0]
        op = Split
    starts = tuple(int(s) for s in np.cumsum([0] + sizes[:-1]))
    return op.apply(x, dim=d, starts=starts, lengths=tuple(sizes))


def chunk(x, chunks, dim=0):
    chunks = int(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if size == 0:  # PyTorch gives `chunks` empty pieces
        return Split.apply(x, dim=d, starts=(0,) * chunks, lengths=(0,) * chunks)
    return split(x, -(-size // chunks), dim)


def unbind(x, dim=0):
    nd = x._data.ndim
    if nd == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = _dim(dim, nd)
    if x._data.shape[d] == 0:
        return ()
    return Unbind.apply(x, dim=d)


def movedim(x, source, destination):
    nd = x._data.ndim
    if nd == 0:
        _dim(source if not isinstance(source, (list, tuple)) else 0, 0)
        return Permute.apply(x, dims=())
    src = list(source) if isinstance(source, (list, tuple)) else [source]
    dst = list(destination) if isinstance(destination, (list, tuple)) else [destination]
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src}) dims should contain the "
                           f"same number of dims as destination ({dst}) dims")
    src_n = [_dim(s, nd) for s in src]
    dst_n = [_dim(s, nd) for s in dst]
    for name, given, norm in (("source", src, src_n), ("destination", dst, dst_n)):
        if len(set(norm)) != len(norm):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({given})")
    order = [i for i in range(nd) if i not in src_n]
    perm = [None] * nd
    for s, t in zip(src_n, dst_n):
        perm[t] = s
    rest = iter(order)
    perm = tuple(p if p is not None else next(rest) for p in perm)
    return Permute.apply(x, dims=perm)


def unflatten(x, dim, sizes):
    shape = x._data.shape
    d = _dim(dim, len(shape))
    sizes = [int(s) for s in sizes]
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    known = int(np.prod([s for s in sizes if s != -1]))
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in sizes:
        if known == 0 or shape[d] % known:
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {dim} "
                               f"({shape[d]}) in the input tensor")
        sizes[sizes.index(-1)] = shape[d] // known
    elif known != shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {dim} "
                           f"({shape[d]}) in the input tensor")
    return Reshape.apply(x, shape=shape[:d] + tuple(sizes) + shape[d + 1:])


def diagonal_view(array, offset, dim1, dim2):
    """The writable strided view of a diagonal, as the last dim (numpy's ``diagonal`` is read-only)."""
    moved = np.moveaxis(array, (dim1, dim2), (-2, -1))
    moved = moved[..., :, offset:] if offset >= 0 else moved[..., -offset:, :]
    length = max(min(moved.shape[-2], moved.shape[-1]), 0)
    return np.lib.stride_tricks.as_strided(moved, shape=moved.shape[:-2] + (length,),
                                           strides=moved.strides[:-2] + (moved.strides[-2] + moved.strides[-1],),
                                           writeable=array.flags.writeable)


class Diagonal(Function):
    """``diagonal(offset, dim1, dim2)``: a view, the diagonal as the last dim."""

    _raw = True
    _view = True

    @staticmethod
    def view(array, offset, dim1, dim2):
        return diagonal_view(array, offset, dim1, dim2)

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx._in = (x.shape, offset, dim1, dim2)
        ctx._meta = {"offset": offset, "dim1": dim1, "dim2": dim2}
        return diagonal_view(x, offset, dim1, dim2)

    @staticmethod
    def backward(ctx, grad):
        shape, offset, dim1, dim2 = ctx._in
        out = np.zeros(shape, dtype=grad.dtype)
        diagonal_view(out, offset, dim1, dim2)[...] = grad
        return out


def diagonal(x, offset=0, dim1=0, dim2=1):
    nd = x._data.ndim
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return Diagonal.apply(x, offset=int(offset), dim1=d1, dim2=d2)


# ----- opsb: copies that rearrange (repeat, tile, repeat_interleave, flip, roll) ---------------------------------
class Repeat(Function):
    """``repeat(*sizes)``: tiles the input; backward sums each tile's gradient back."""

    _raw = True

    @staticmethod
    def forward(ctx, x, repeats):
        lead = len(repeats) - x.ndim
        padded = (1,) * lead + x.shape
        ctx._in = (x.shape, padded, repeats)
        ctx._meta = {"repeats": repeats}
        return np.tile(x.reshape(padded), repeats)

    @staticmethod
    def backward(ctx, grad):
        shape, padded, repeats = ctx._in
        split = []
        for r, s in zip(repeats, padded):
            split += [r, s]
        return grad.reshape(split).sum(axis=tuple(range(0, len(split), 2))).reshape(shape)


def repeat(x, sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < x._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           "tensor")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {list(sizes)}")
    return Repeat.apply(x, repeats=sizes)


def tile(x, dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = (1,) * (x._data.ndim - len(dims)) + tuple(int(d) for d in dims)
    return repeat(x, dims)


class RepeatInterleave(Function):
    """``repeat_interleave``: each slice along ``dim`` repeated ``repeats`` times (an int or one count each)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, repeats, dim):
        ctx._in = (x.shape, repeats, dim)
        ctx._meta = {"dim": dim}
        return np.repeat(x, repeats, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        shape, repeats, dim = ctx._in
        if np.ndim(repeats) == 0:
            split = shape[:dim] + (shape[dim], int(repeats)) + shape[dim + 1:]
            return grad.reshape(split).sum(axis=dim + 1)
        out = np.zeros(shape, dtype=grad.dtype)
        counts = np.asarray(repeats)
        used = counts > 0
        if used.any():
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[used]
            out[_slicer(dim, used)] = np.add.reduceat(grad, starts, axis=dim)
        return out


def repeat_interleave(x, repeats=None, dim=None, output_size=None):
    if repeats is None:  # torch.repeat_interleave(counts): the indices each repeated counts[i] times
        counts = x._data
        return Variable(np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts))
    if dim is None:
        x, dim = Reshape.apply(x, shape=(-1,)) if x._data.ndim != 1 else x, 0
    d = _dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if isinstance(repeats, Variable):
        repeats = repeats._data
    if np.ndim(repeats) == 0:
        repeats = int(repeats)
        if repeats < 0:
            raise RuntimeError("repeats can not be negative")
    else:
        repeats = np.asarray(repeats, dtype=np.int64).reshape(-1)
        if repeats.size == 1:
            repeats = int(repeats[0])
        elif repeats.shape[0] != size:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{repeats.shape[0]} and input.size({d}) = {size}")
        elif (repeats < 0).any():
            raise RuntimeError("repeats can not be negative")
    return RepeatInterleave.apply(x, repeats=repeats, dim=d)


def _dims_list(dims, nd):
    dims = list(dims) if isinstance(dims, (tuple, list)) else [dims]
    norm = [_dim(d, nd) for d in dims]
    for d in norm:
        if norm.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return tuple(norm)


class Flip(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx._dims = dims
        ctx._meta = {"dims": dims}
        return np.flip(x, dims).copy()

    @staticmethod
    def backward(ctx, grad):
        return np.flip(grad, ctx._dims)


def flip(x, dims):
    dims = _dims_list(dims, x._data.ndim)
    return Flip.apply(x, dims=dims if x._data.ndim else ())


class Roll(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx._roll = (shifts, dims, x.shape)
        ctx._meta = {"shifts": shifts, "dims": dims}
        if dims is None:
            return np.roll(x.reshape(-1), shifts).reshape(x.shape)
        return np.roll(x, shifts, axis=dims)

    @staticmethod
    def backward(ctx, grad):
        shifts, dims, shape = ctx._roll
        back = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        if dims is None:
            return np.roll(grad.reshape(-1), back).reshape(shape)
        return np.roll(grad, back, axis=dims)


def roll(x, shifts, dims=None):
    shift_list = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
    if dims is None:
        if len(shift_list) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift_list)}, dims:0")
        return Roll.apply(x, shifts=int(shift_list[0]), dims=None)
    dim_list = list(dims) if isinstance(dims, (tuple, list)) else [dims]
    if len(shift_list) != len(dim_list):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift_list)}, dims:{len(dim_list)}")
    nd = x._data.ndim
    return Roll.apply(x, shifts=tuple(int(s) for s in shift_list), dims=tuple(_dim(d, nd) for d in dim_list))


__all__ = ["Reshape", "Transpose", "Permute", "Squeeze", "Unsqueeze", "Expand", "Clone", "Cat", "Stack", "view",
           "reshape", "flatten", "expand", "cat", "stack", "Variable", "Narrow", "SplitPiece",
           "SplitWithSizesPiece", "Select", "Split", "SplitWithSizes", "Unbind", "Diagonal", "Repeat",
           "RepeatInterleave", "Flip", "Roll", "narrow", "split", "chunk", "unbind", "movedim", "unflatten",
           "diagonal", "diagonal_view", "repeat", "tile", "repeat_interleave", "flip", "roll"]
