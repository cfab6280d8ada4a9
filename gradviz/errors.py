"""Exception classes raised by the engine.

Each subclasses the built-in exception PyTorch raises in the same situation (mostly ``RuntimeError``), so
``except RuntimeError`` in a PyTorch script still catches it, and each carries the objects involved so the
debugger can point at them without parsing the message.
"""


class GradvizError(Exception):
    """Base class of every gradviz-specific error."""


class NonScalarBackwardError(GradvizError, RuntimeError):
    """``backward()`` was called on a non-scalar output without a gradient."""

    def __init__(self, variable):
        super().__init__("grad can be implicitly created only for scalar outputs")
        self.variable = variable


class NoGradFnError(GradvizError, RuntimeError):
    """``backward()`` was called on an output that does not require grad."""

    def __init__(self, index, variable):
        super().__init__(
            f"element {index} of tensors does not require grad and does not have a grad_fn"
        )
        self.variable = variable


class GraphFreedError(GradvizError, RuntimeError):
    """A node's saved tensors were read after a backward freed them."""

    def __init__(self, node):
        super().__init__(
            "Trying to backward through the graph a second time (or directly access saved tensors after "
            "they have already been freed). Saved intermediate values of the graph are freed when you call "
            ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
            "graph a second time or if you need to access saved tensors after calling backward. "
            f"(node: {node.name()})"
        )
        self.node = node


class StaleVersionError(GradvizError, RuntimeError):
    """A tensor saved for backward was modified in place before backward read it."""

    def __init__(self, node, index, shape, dtype, expected, current, is_output):
        shape_text = ", ".join(str(d) for d in shape)
        kind = "output" if is_output else "input"
        super().__init__(
            "one of the variables needed for gradient computation has been modified by an inplace "
            f"operation: [{dtype_name(dtype)} [{shape_text}]], which is {kind} {index} of {node.name()}, "
            f"is at version {current}; expected version {expected} instead. Hint: `gradviz run` shows the line "
            "that saved it and the line that modified it."
        )
        self.node = node
        self.index = index
        self.expected = expected
        self.current = current


class LeafInplaceError(GradvizError, RuntimeError):
    """An in-place op was applied to a leaf that requires grad (or a view of one)."""

    def __init__(self, variable, op_name, through_view=False):
        if through_view:
            text = (
                "a view of a leaf Variable that requires grad is being used in an in-place operation."
                f" (op: {op_name})"
            )
        else:
            text = f"a leaf Variable that requires grad is being used in an in-place operation. (op: {op_name})"
        super().__init__(text)
        self.variable = variable
        self.op_name = op_name


class ShapeError(GradvizError, RuntimeError):
    """Operands whose shapes do not fit the operation."""


class DtypeError(GradvizError, RuntimeError):
    """An operation on a dtype it does not support (e.g. requires_grad on an integer tensor)."""


class UnsupportedError(GradvizError, NotImplementedError):
    """A PyTorch feature gradviz does not implement; the message names it. ``torch_name``, when given, names the
    feature as PyTorch spells it (``create_graph=True``): ``gradviz run`` then stops there as at a missing name,
    in one line, and its report says that nothing after it was checked."""

    def __init__(self, message, torch_name=None):
        super().__init__(message)
        self.torch_name = torch_name


def dtype_name(dtype):
    """PyTorch's spelling of a numpy dtype in messages: ``torch.FloatTensor`` style is gone; use ``float32``."""
    return {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "int64": "torch.LongTensor",
            "bool": "torch.BoolTensor"}.get(str(dtype), str(dtype))


# ----- names and devices gradviz does not provide ---------------------------------------------------------------
def supported_command(name):
    """The command that lists the supported names next to ``name`` (``torch.nn.LSTMM`` -> ``torch.nn``)."""
    parent = name.rpartition(".")[0] or name
    return f"gradviz supported {'torch.Tensor' if parent == 'Tensor' else parent}"


class UnsupportedNameError(GradvizError):
    """A PyTorch name gradviz's engine does not provide: one line naming it, the closest supported name when
    there is one, and the command that lists the rest (``torch_name`` holds the name).

    ``closest`` may be a function computing it: ``hasattr`` probes then cost nothing until the message is read."""

    def __init__(self, name, closest=None):
        super().__init__(name)
        self.torch_name = name
        self._closest = closest

    @property
    def closest(self):
        if callable(self._closest):
            self._closest = self._closest()
        return self._closest

    def __str__(self):
        hint = f"did you mean `{self.closest}`? " if self.closest else ""
        return (f"`{self.torch_name}` is not supported by gradviz's engine; {hint}"
                f"`{supported_command(self.torch_name)}` lists the supported names")


class UnsupportedTensorAttribute(UnsupportedNameError, AttributeError):
    """``x.xyz`` for a Tensor method or attribute gradviz lacks (an AttributeError: ``hasattr`` still works)."""


class DeviceError(GradvizError, RuntimeError, AssertionError):
    """A device other than the CPU. PyTorch built without CUDA raises AssertionError for ``cuda`` and
    RuntimeError for other missing backends; this is both. ``torch_name`` names what was asked for
    (``device('cuda')``)."""

    def __init__(self, message, torch_name=None):
        super().__init__(message)
        self.torch_name = torch_name
