"""One ragdot custom call, per static configuration (dimension numbers, output dtype, group
offset's local group count): an XLA FFI call with ragdot's batching rule attached."""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import numpy as np

from .. import _native
from .._dims import Dims
from .._signature import describe, spec_args
from . import _targets


class Static(NamedTuple):
    dims: Dims
    out_dtype: str  # ragdot's dtype name
    local_groups: int  # -1: no group offset


def _spec(static: Static, lhs, rhs, group_sizes):
    return spec_args(lhs.shape, lhs.dtype, rhs.shape, rhs.dtype, group_sizes.shape, group_sizes.dtype, static.dims,
                     static.out_dtype, None if static.local_groups < 0 else static.local_groups)


def out_aval(static: Static, lhs, rhs, group_sizes) -> jax.ShapeDtypeStruct:
    """The output's shape and dtype; raises ValueError/TypeError with the library's message."""
    shape, dtype, _ = describe(_spec(static, lhs, rhs, group_sizes))
    return jax.ShapeDtypeStruct(shape, {"f32": np.float32, "f16": np.float16, "bf16": jax.numpy.bfloat16}[dtype])


def _ffi(static: Static, lhs, rhs, group_sizes, group_offset):
    out = out_aval(static, lhs, rhs, group_sizes)
    # A GPU plan that needs workspace (every Hopper wgmma plan: its tile counter; an operand's
    # relayout copy; a checked plan's verdict) gets it as a second result, which XLA allocates with
    # the call's other buffers (the CPU handler ignores it). It is sized on GPU 0 at trace time.
    ws_bytes = _native.ffi_device_workspace_bytes(_spec(static, lhs, rhs, group_sizes))
    results = (out, jax.ShapeDtypeStruct((ws_bytes,), np.uint8)) if ws_bytes else out
    call = jax.ffi.ffi_call(_targets.register(), results)
    got = call(lhs, rhs, group_sizes, group_offset, dims=static.dims.encode(),
               local_groups=np.int64(static.local_groups))
    return got[0] if ws_bytes else got


@functools.lru_cache(maxsize=None)
def core(static: Static):
    """f(lhs, rhs, group_sizes, group_offset int32[1]) -> out, batched by ragdot's own rule."""
    from ._batching import batching_rule

    fn = jax.custom_batching.custom_vmap(functools.partial(_ffi, static))
    fn.def_vmap(functools.partial(batching_rule, static))
    return fn
