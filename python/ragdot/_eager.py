"""ragged_dot and ragged_dot_general on concrete arrays (NumPy on the host; PyTorch or CuPy on
the host or a CUDA GPU), with JAX's semantics and ragdot's guarantees. Plans are cached in the
native module per static signature, so repeated calls with one shape plan once."""
from __future__ import annotations

from typing import Optional

from . import _native
from ._array_frameworks import framework_of
from ._dims import RAGGED_DOT, normalize
from ._reduce_dims import reduce_as_batch
from ._signature import default_local_groups, describe, spec_args


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, *, local_groups: Optional[int] = None,
                       backend: Optional[str] = None):
    """jax.lax.ragged_dot_general on arrays of one framework, computed by ragdot.

    `precision` is accepted for signature compatibility; ragdot accumulates in float32.
    `group_offset` (an int or a one-element integer array) computes only the groups
    [offset, offset + local_groups); `local_groups` defaults to the size of rhs's group dimension
    in mode 1 and must be given in mode 2. `backend` names a ragdot backend ("cpu", "cpu_ref",
    "padded", "cuda"); by default the best one for the arrays' memory is chosen.
    """
    dims = normalize(ragged_dot_dimension_numbers)
    fw = framework_of(lhs)
    lhs, rhs, group_sizes = fw.adopt(lhs), fw.adopt(rhs), fw.adopt(group_sizes)
    offset = None
    if group_offset is not None:
        local_groups = default_local_groups(dims, rhs.shape, group_sizes.shape, local_groups)
        offset = fw.int32(group_offset, lhs)
    spec = spec_args(lhs.shape, lhs.dtype, rhs.shape, rhs.dtype, group_sizes.shape, group_sizes.dtype, dims,
                     preferred_element_type, local_groups if group_offset is not None else None)
    out_shape, out_dtype, _ = describe(spec)
    batched = reduce_as_batch(dims)
    if batched is not None:
        # group sizes vary along a contracting dim: the batched op in float32, then the sum
        # (_reduce_dims.py), which every backend takes (the cuda backend declines the direct form)
        wide = ragged_dot_general(lhs, rhs, group_sizes, batched.dims, None, "float32", group_offset,
                                  local_groups=local_groups, backend=backend)
        return fw.sum_as(wide, batched.sum_axes, out_dtype)
    out = fw.empty(out_shape, out_dtype, lhs)
    # GPU plans may need workspace (an operand's relayout copy); it comes from the arrays' framework
    ws_bytes = _native.workspace_bytes(spec, fw.buffer(out), backend or "") if fw.on_device(out) else 0
    workspace = fw.workspace(ws_bytes, lhs) if ws_bytes else None
    _native.execute(spec, fw.buffer(lhs), fw.buffer(rhs), fw.buffer(group_sizes),
                    None if offset is None else fw.buffer(offset), fw.buffer(out), backend or "", fw.stream(lhs),
                    workspace)
    return out


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None, *,
               backend: Optional[str] = None):
    """jax.lax.ragged_dot: lhs [m, k], rhs [g, k, n], group_sizes [g] -> [m, n]."""
    return ragged_dot_general(lhs, rhs, group_sizes, RAGGED_DOT, precision, preferred_element_type, group_offset,
                              backend=backend)
