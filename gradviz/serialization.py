"""``save`` / ``load``: tensors and nested containers of them, in a format that never runs code when read.

A saved file is a zip archive holding ``gradviz-save.json`` (a manifest describing the object) and one
``tensors/N.npy`` per distinct tensor, read back with ``numpy.load(allow_pickle=False)``. It can hold exactly
what PyTorch's ``torch.load(weights_only=True)`` accepts in practice: tensors and Parameters, ``None``, bools,
ints, floats, strings, dtypes, devices, ``Size``, and lists, tuples, dicts and ordered dicts of these — so model
and optimizer ``state_dict()``s. Nothing is ever unpickled, so loading an untrusted file is safe; anything else
(a pickled PyTorch file, an arbitrary object) is a one-line error.

Manifest values: JSON strings, bools, ints and ``None`` stand for themselves; everything else is a one-key
object — ``{"float": 0.5}`` (or ``"nan"``, ``"inf"``, ``"-inf"``), ``{"list": [...]}``, ``{"tuple": [...]}``,
``{"dict": [[key, value], ...]}``, ``{"ordered_dict": [...]}``, ``{"tensor": N, "requires_grad": false}``,
``{"parameter": N, "requires_grad": true}``, ``{"dtype": "float32"}``, ``{"device": "cpu"}``, ``{"size": [...]}``.
"""

import io
import json
import math
import os
import pickle
import tempfile
import zipfile
from collections import OrderedDict

import numpy as np

from .autograd.variable import Size, Variable
from .device import as_device, device
from .errors import GradvizError

FORMAT = "gradviz-save"
VERSION = 1
MANIFEST = "gradviz-save.json"
_DTYPES = ("float32", "float64", "int64", "int32", "uint8", "bool")
# numpy's zip magic; PyTorch's own files are zips too (told apart by the missing manifest)
_ZIP_MAGIC = b"PK\x03\x04"


class SaveError(GradvizError, TypeError):
    """An object ``save`` cannot store safely (a module, a function, a numpy array…); ``torch_name`` says what
    was asked for (``torch.save(Linear)``), as for the other things gradviz lacks."""

    def __init__(self, message, kind=None):
        super().__init__(message)
        self.torch_name = f"torch.save({kind})" if kind else None


class LoadError(GradvizError, pickle.UnpicklingError):
    """A file ``load`` will not read: not written by ``gradviz.save``, or damaged. (PyTorch raises
    ``UnpicklingError`` when ``weights_only=True`` refuses a file.)"""

    def __init__(self, message, foreign=False):
        super().__init__(message)
        self.torch_name = "torch.load of a file gradviz.save did not write" if foreign else None


# ----- save ---------------------------------------------------------------------------------------------------
def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write ``obj`` to ``f`` (a path or a binary file object open for writing)."""
    if pickle_module is not None:
        raise SaveError("gradviz.save never pickles: pickle_module is not supported")
    arrays = []
    manifest = {"format": FORMAT, "version": VERSION, "object": _encode(obj, arrays, {}, "obj")}
    if isinstance(f, (str, os.PathLike)):
        _write_atomically(os.fspath(f), manifest, arrays)
    else:
        _write_zip(f, manifest, arrays)


def _encode(value, arrays, seen, where):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return {"float": value if math.isfinite(value) else repr(value)}
    if isinstance(value, Variable):
        return _encode_tensor(value, arrays, seen)
    if isinstance(value, np.dtype):
        if str(value) not in _DTYPES:
            raise SaveError(f"gradviz.save cannot store dtype {value} ({where})")
        return {"dtype": str(value)}
    if isinstance(value, device):
        return {"device": str(value)}
    if isinstance(value, Size):
        return {"size": [int(d) for d in value]}
    if isinstance(value, (list, tuple)):
        items = [_encode(v, arrays, seen, f"{where}[{i}]") for i, v in enumerate(value)]
        return {"list" if isinstance(value, list) else "tuple": items}
    if isinstance(value, dict):
        kind = "ordered_dict" if isinstance(value, OrderedDict) else "dict"
        return {kind: [[_encode(k, arrays, seen, f"{where} key"), _encode(v, arrays, seen, f"{where}[{k!r}]")]
                       for k, v in value.items()]}
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return _encode(value.item(), arrays, seen, where)
    raise SaveError(f"gradviz.save stores tensors, numbers, strings and lists/tuples/dicts of them (what "
                    f"torch.load(weights_only=True) reads), not {_describe(value)} at {where}"
                    + ("; save its state_dict() instead" if hasattr(value, "state_dict") else ""),
                    type(value).__name__)


def _encode_tensor(tensor, arrays, seen):
    # the same tensor saved twice is loaded as one tensor, as PyTorch keeps shared storages shared
    index = seen.get(id(tensor))
    if index is None:
        index = seen[id(tensor)] = len(arrays)
        arrays.append(np.asarray(tensor._data))
    from .nn.parameter import Parameter

    kind = "parameter" if isinstance(tensor, Parameter) else "tensor"
    return {kind: index, "requires_grad": bool(tensor._requires_grad)}


def _describe(value):
    kind = type(value)
    name = kind.__name__ if kind.__module__ in ("builtins", None) else f"{kind.__module__}.{kind.__name__}"
    return f"an object of type {name}"


def _write_zip(file, manifest, arrays):
    with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(MANIFEST, json.dumps(manifest, allow_nan=False))
        for i, array in enumerate(arrays):
            buffer = io.BytesIO()
            np.save(buffer, array, allow_pickle=False)
            archive.writestr(f"tensors/{i}.npy", buffer.getvalue())


def _write_atomically(path, manifest, arrays):
    """Write beside ``path`` and rename over it: an interrupted save never leaves a torn file."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".gradviz-save-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as file:
            _write_zip(file, manifest, arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


# ----- load ---------------------------------------------------------------------------------------------------
def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Read what ``save`` wrote. ``map_location`` may name the CPU (a string, a device, a dict mapping saved
    locations to ``"cpu"``) or be a function ``(tensor, location) -> tensor``. ``weights_only`` is accepted
    either way: gradviz's format holds nothing but weights, so there is nothing else to load."""
    if pickle_module is not None:
        raise LoadError("gradviz.load never unpickles: pickle_module is not supported")
    remap = _location_mapper(map_location)
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "the file")
    data = _read_bytes(f)
    if not data.startswith(_ZIP_MAGIC):
        raise LoadError(f"`{name}` was not written by gradviz.save (gradviz's engine loads only its own safe "
                        "format, never a pickle)", foreign=True)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if MANIFEST not in archive.namelist():
                raise LoadError(f"`{name}` is not a gradviz.save file (a PyTorch file? gradviz's engine loads only "
                                "its own safe format: save it with gradviz.save, e.g. under `gradviz run --torch`)",
                                foreign=True)
            manifest = json.loads(archive.read(MANIFEST))
            if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
                raise LoadError(f"`{name}`: unsupported gradviz.save format {manifest.get('format')!r} version "
                                f"{manifest.get('version')!r} (this gradviz reads version {VERSION})")
            tensors = {}
            return _decode(manifest["object"], archive, tensors, remap, name)
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError) as exc:
        raise LoadError(f"`{name}` is damaged: {exc}") from None


def _read_bytes(f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return file.read()
    return f.read()


def _location_mapper(map_location):
    """A function tensor -> tensor applying ``map_location``; every accepted form ends on the CPU."""
    if map_location is None:
        return None
    if callable(map_location) and not isinstance(map_location, (str, device)):
        return lambda tensor: _mapped(map_location(tensor, "cpu"), tensor)
    targets = map_location.values() if isinstance(map_location, dict) else [map_location]
    for target in targets:
        as_device(target)  # a CUDA target raises, as PyTorch without CUDA does
    return None


def _mapped(result, tensor):
    if result is None:
        return tensor
    if not isinstance(result, Variable):
        raise LoadError(f"map_location returned {type(result).__name__}, expected a tensor")
    return result


_TAGS = ("float", "list", "tuple", "dict", "ordered_dict", "tensor", "parameter", "dtype", "device", "size")


def _decode(value, archive, tensors, remap, name):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if not isinstance(value, dict) or not value or next(iter(value)) not in _TAGS:
        raise LoadError(f"`{name}` is damaged: unexpected manifest entry {str(value)[:60]}")
    tag, body = next(iter(value.items()))
    if tag == "float":
        return float(body)
    if tag in ("list", "tuple"):
        items = [_decode(v, archive, tensors, remap, name) for v in body]
        return items if tag == "list" else tuple(items)
    if tag in ("dict", "ordered_dict"):
        pairs = [(_decode(k, archive, tensors, remap, name), _decode(v, archive, tensors, remap, name))
                 for k, v in body]
        return OrderedDict(pairs) if tag == "ordered_dict" else dict(pairs)
    if tag in ("tensor", "parameter"):
        key = (int(body), tag)
        if key not in tensors:
            tensors[key] = _load_tensor(archive, int(body), tag, value.get("requires_grad", False), remap)
        return tensors[key]
    if tag == "dtype":
        if body not in _DTYPES:
            raise LoadError(f"`{name}` is damaged: unknown dtype {body!r}")
        return np.dtype(body)
    if tag == "device":
        return device(body)
    return Size(int(d) for d in body)


def _load_tensor(archive, index, tag, requires_grad, remap):
    from .factories import _make
    from .nn.parameter import Parameter

    with archive.open(f"tensors/{index}.npy") as file:
        array = np.load(io.BytesIO(file.read()), allow_pickle=False)
    if tag == "parameter":
        tensor = Parameter(array, requires_grad=bool(requires_grad))
    else:
        tensor = _make(array, bool(requires_grad), "new")
    return remap(tensor) if remap else tensor
