"""Everything ``import gradviz`` offers from the engine, loaded as one piece on first use (gradviz/__init__.py).

Kept apart from the package's ``__init__`` so that ``gradviz --help`` and the other light entry points, which import
the package first, do not pay for numpy and the engine.
"""
from . import autograd
from ._version import __version__
from .autograd import (Function, Tensor, Variable, enable_grad, is_grad_enabled, no_grad,
                       set_grad_enabled)
from .dtypes import bool_ as bool  # noqa: A001 - PyTorch's name
from .dtypes import double, float32, float64, int32, int64, long, uint8
from .dtypes import float32 as float  # noqa: A001 - PyTorch's name
from .factories import (arange, as_tensor, empty, eye, from_numpy, full, full_like, linspace, manual_seed,
                        ones, ones_like, rand, randint, randn, randperm, tensor, zeros, zeros_like)
from .functions import *  # noqa: F401,F403 - the torch-namespace ops (abs, max, sum… shadow builtins here only)
from .autograd.variable import Size

__all__ = ["Variable", "Tensor", "Function", "autograd", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "tensor", "zeros", "ones", "empty", "full", "eye", "arange", "linspace", "rand",
           "randn", "randint", "manual_seed", "float32", "float64", "int64", "bool", "__version__", "Size",
           "double", "long", "int32", "uint8", "float", "from_numpy", "as_tensor", "zeros_like", "ones_like",
           "full_like", "randperm"]

# ----- type promotion (issue 8, opsa) ------------------------------------------------------------------------
from .dtypes import can_cast, promote_types, result_type  # noqa: E402

__all__ += ["result_type", "promote_types", "can_cast"]
# The pointwise math family and logical ops (gradviz/functions.py, the opsa block): listed in __all__, which the
# torch shim reads.
from .functions import POINTWISE_NAMES as _POINTWISE_NAMES  # noqa: E402

__all__ += _POINTWISE_NAMES

# ----- opsb: the torch-namespace ops and factories added for issue 8 ------------------------------------------------
from .functions import (cat, concat, stack, flatten, narrow, split, chunk, unbind, movedim, moveaxis, unflatten,
                        diagonal, tile, repeat_interleave, flip, roll, gather, scatter, scatter_add, index_select,
                        index_add, take_along_dim, sort, argsort, topk, cumsum, cumprod, prod, logsumexp, norm,
                        amax, amin, all, any, bmm, addmm, baddbmm, einsum, outer, ger, dot, tril, triu, diag,
                        logspace, rand_like, randn_like, multinomial, bernoulli, normal)  # noqa: E402,A004

__all__ += ["cat", "concat", "stack", "flatten", "narrow", "split", "chunk", "unbind", "movedim", "moveaxis",
            "unflatten", "diagonal", "tile", "repeat_interleave", "flip", "roll", "gather", "scatter",
            "scatter_add", "index_select", "index_add", "take_along_dim", "sort", "argsort", "topk", "cumsum",
            "cumprod", "prod", "logsumexp", "norm", "amax", "amin", "all", "any", "bmm", "addmm", "baddbmm",
            "einsum", "outer", "ger", "dot", "tril", "triu", "diag", "logspace", "rand_like", "randn_like",
            "multinomial", "bernoulli", "normal"]

# ----- devices, defaults, generators, legacy constructors, saving (PyTorch's process-level names) -------------
from .device import device, get_default_device, set_default_device  # noqa: E402
from .dtypes import get_default_dtype, set_default_dtype  # noqa: E402
from .dtypes import int32 as int  # noqa: E402,A001 - PyTorch's name
from .generator import (Generator, are_deterministic_algorithms_enabled, default_generator,  # noqa: E402
                        get_rng_state, initial_seed, is_deterministic_algorithms_warn_only_enabled, seed,
                        set_rng_state, use_deterministic_algorithms)
from .legacy import BoolTensor, DoubleTensor, FloatTensor, IntTensor, LongTensor  # noqa: E402

__all__ += ["device", "get_default_device", "set_default_device", "get_default_dtype", "set_default_dtype", "int",
            "Generator", "default_generator", "initial_seed", "seed", "FloatTensor", "DoubleTensor", "LongTensor",
            "IntTensor", "BoolTensor", "get_rng_state", "set_rng_state", "use_deterministic_algorithms",
            "are_deterministic_algorithms_enabled",
            "is_deterministic_algorithms_warn_only_enabled"]

# ----- breadth2: names tutorials use (inference_mode, isclose, nonzero, unique, meshgrid, finfo/iinfo) --------
from .autograd.inference_mode import inference_mode, is_inference_mode_enabled  # noqa: E402
from .ops.searching import isclose, meshgrid, nonzero, unique  # noqa: E402
from .type_info import finfo, iinfo  # noqa: E402

__all__ += ["inference_mode", "is_inference_mode_enabled", "isclose", "meshgrid", "nonzero", "unique", "finfo",
            "iinfo"]
