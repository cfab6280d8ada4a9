"""``torch.device`` and the process-wide default device. gradviz's engine computes on the CPU only.

A ``device("cuda")`` object can be made, compared and printed as in PyTorch (scripts build one before asking
``torch.cuda.is_available()``); putting a tensor on it is what fails, with PyTorch's words and a one-line reason.
"""

from .errors import DeviceError

# The device types PyTorch knows, in the order its "Expected one of ..." message lists them.
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class device:  # noqa: N801 - PyTorch's name
    """``device("cpu")``, ``device("cpu:0")``, ``device("cpu", 0)``: a type and an optional index, immutable."""

    __slots__ = ("_type", "_index")

    def __init__(self, type=None, index=None):  # noqa: A002 - PyTorch's argument name
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device() received an invalid combination of arguments: a device and an index")
            self._type, self._index = type.type, type.index
            return
        if type is None:
            raise TypeError("device() received an invalid combination of arguments - got (), but expected one of:"
                            " (torch.device device) or (str type, int index = -1)")
        if isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type  # device(0): PyTorch reads a bare index as the accelerator's
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got ({_type_name(type)})")
        kind, colon, text_index = type.partition(":")
        if kind not in DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device "
                               f"string: {type}")
        if colon:
            if not text_index.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was passed "
                                   f"explicitly: {type}")
            index = int(text_index)
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise TypeError(f"device() index must be an int, not {_type_name(index)}")
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self._type, self._index = kind, index

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __eq__(self, other):
        return isinstance(other, device) and (self._type, self._index) == (other._type, other._index)

    def __hash__(self):
        return hash((self._type, self._index))

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __reduce__(self):
        return (device, (self._type, self._index))


def _type_name(value):
    return type(value).__name__


CPU = device("cpu")
_default = [CPU]


def as_device(value):
    """A ``device`` the engine can compute on, from a device, a string or an index; ``None`` means the default.

    Anything but the CPU raises ``DeviceError`` with PyTorch's words for a build without that backend."""
    if value is None:
        return _default[0]
    dev = value if isinstance(value, device) else device(value)
    if dev.type == "cpu":
        return dev
    raise DeviceError(_not_available(dev), f"device('{dev}')")


def _not_available(dev):
    names = {"cuda": "CUDA", "xpu": "XPU", "hip": "HIP"}
    if dev.type in names:
        reason = f"Torch not compiled with {names[dev.type]} enabled"
    else:
        reason = f"PyTorch is not linked with support for {dev.type} devices"
    return f"{reason}: gradviz's engine runs on the CPU only (device `{dev}`)"


def set_default_device(value):
    """``torch.set_default_device``: only the CPU (or ``None``, which means the CPU) is accepted."""
    _default[0] = CPU if value is None else as_device(value)


def get_default_device():
    return _default[0]


def parse_to(args, kwargs):
    """The ``(device, dtype, other)`` of ``.to(...)``'s forms: ``to(device)``, ``to(dtype)``,
    ``to(device, dtype)``, ``to(other)`` and the keywords; ``device`` is checked (CPU only)."""
    dev, dtype, other = kwargs.get("device"), kwargs.get("dtype"), None
    for a in args:
        if isinstance(a, (device, int)) and not isinstance(a, bool):
            dev = a
        elif isinstance(a, str) and a.partition(":")[0] in DEVICE_TYPES:
            dev = a
        elif hasattr(a, "_data") and hasattr(a, "dtype"):  # a tensor: its device and dtype
            other = a
            dtype = a.dtype
        else:
            dtype = a
    return (as_device(dev) if dev is not None else None), dtype, other
