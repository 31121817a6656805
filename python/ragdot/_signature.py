"""The static signature of one call, as the native module takes it, and what it describes."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np


from . import _native
from ._dims import Dims

_DTYPE_NAMES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int32": "i32",
                "int64": "i64"}


def dtype_name(dtype) -> str:
    """ragdot's name for a NumPy, ml_dtypes, JAX or PyTorch dtype ("torch.bfloat16" included)."""
    text = str(dtype)
    if text in _DTYPE_NAMES.values():
        return text
    if text.startswith("torch."):
        text = text[len("torch."):]
    else:
        try:
            text = np.dtype(dtype).name
        except TypeError:
            pass
    if text not in _DTYPE_NAMES:
        raise TypeError(f"ragdot does not take dtype {dtype}: it takes float32, bfloat16 and float16 operands "
                        "and int32 or int64 group sizes")
    return _DTYPE_NAMES[text]


def spec_args(lhs_shape: Sequence[int], lhs_dtype, rhs_shape: Sequence[int], rhs_dtype,
              gs_shape: Sequence[int], gs_dtype, dims: Dims, preferred_element_type=None,
              local_groups: Optional[int] = None):
    s = _native.SpecArgs()
    s.lhs_shape, s.lhs_dtype = [int(d) for d in lhs_shape], dtype_name(lhs_dtype)
    s.rhs_shape, s.rhs_dtype = [int(d) for d in rhs_shape], dtype_name(rhs_dtype)
    s.gs_shape, s.gs_dtype = [int(d) for d in gs_shape], dtype_name(gs_dtype)
    s.dims = [int(v) for v in dims.encode()]
    s.preferred_element_type = None if preferred_element_type is None else dtype_name(preferred_element_type)
    s.local_groups = None if local_groups is None else int(local_groups)
    return s


def describe(spec) -> Tuple[Tuple[int, ...], str, int]:
    """(output shape, output dtype name, mode); raises ValueError/TypeError for a bad signature."""
    shape, dtype, mode = _native.describe(spec)
    return tuple(shape), dtype, mode


def default_local_groups(dims: Dims, rhs_shape: Sequence[int], gs_shape: Sequence[int],
                         local_groups: Optional[int]) -> int:
    """The groups a group offset computes: mode 1 takes them from rhs's group dimension."""
    if local_groups is not None:
        return int(local_groups)
    if dims.mode() == 1 and dims.rhs_group and 0 <= dims.rhs_group[0] < len(rhs_shape):
        return int(rhs_shape[dims.rhs_group[0]])
    return int(gs_shape[-1]) if len(gs_shape) else 0


