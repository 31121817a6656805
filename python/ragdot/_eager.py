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
    return _run(fw, spec, out_shape, out_dtype, lhs, rhs, group_sizes, offset, backend)


def _run(fw, spec, out_shape, out_dtype, lhs, rhs, group_sizes, offset, backend, lhs_rows=None):
    """Allocates the output (and any device workspace) in the arrays' framework and executes."""
    out = fw.empty(out_shape, out_dtype, lhs)
    # GPU plans may need workspace (an operand's relayout copy); it comes from the arrays' framework
    table_rows = None if lhs_rows is None else int(lhs.shape[0])
    ws_bytes = _native.workspace_bytes(spec, fw.buffer(out), backend or "", table_rows) if fw.on_device(out) else 0
    workspace = fw.workspace(ws_bytes, lhs) if ws_bytes else None
    _native.execute(spec, fw.buffer(lhs), fw.buffer(rhs), fw.buffer(group_sizes),
                    None if offset is None else fw.buffer(offset), fw.buffer(out), backend or "", fw.stream(lhs),
                    workspace, None if lhs_rows is None else fw.buffer(lhs_rows))
    return out


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None, *,
               backend: Optional[str] = None, lhs_rows=None):
    """jax.lax.ragged_dot: lhs [m, k], rhs [g, k, n], group_sizes [g] -> [m, n].

    `lhs_rows` (a 1-D int32 array of m indices, same framework and device) makes `lhs` a table of
    rows [r, k] read through it: row i of the product's lhs is lhs[lhs_rows[i]], and an index
    outside [0, r) reads a row of zeros. An MoE layer passes its tokens and their expert-sorted
    order this way instead of building the sorted copy. Backends: cpu, cpu_ref, and cuda on Hopper.
    """
    if lhs_rows is None:
        return ragged_dot_general(lhs, rhs, group_sizes, RAGGED_DOT, precision, preferred_element_type,
                                  group_offset, backend=backend)
    fw = framework_of(lhs)
    lhs, rhs, group_sizes, lhs_rows = fw.adopt(lhs), fw.adopt(rhs), fw.adopt(group_sizes), fw.adopt(lhs_rows)
    if len(lhs.shape) != 2 or len(lhs_rows.shape) != 1:
        raise ValueError("with lhs_rows, lhs is a 2-D table of rows [r, k] and lhs_rows a 1-D index [m]")
    if str(lhs_rows.dtype) not in ("int32", "torch.int32"):
        raise TypeError(f"lhs_rows must be int32, got {lhs_rows.dtype}")
    offset, local_groups = None, None
    if group_offset is not None:
        local_groups = default_local_groups(RAGGED_DOT, rhs.shape, group_sizes.shape, None)
        offset = fw.int32(group_offset, lhs)
    gathered_shape = (int(lhs_rows.shape[0]), int(lhs.shape[1]))
    spec = spec_args(gathered_shape, lhs.dtype, rhs.shape, rhs.dtype, group_sizes.shape, group_sizes.dtype,
                     RAGGED_DOT, preferred_element_type, local_groups)
    out_shape, out_dtype, _ = describe(spec)
    return _run(fw, spec, out_shape, out_dtype, lhs, rhs, group_sizes, offset, backend, lhs_rows)
