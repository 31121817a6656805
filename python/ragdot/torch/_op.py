"""ragdot::ragged_dot_general, a torch.library custom op with a fake (meta) kernel and autograd
whose cotangents are the same op (ragdot/_cotangents.py)."""
from __future__ import annotations

from typing import List, Optional

import torch

from .._cotangents import cotangent_ops, is_identity, narrow_cotangent
from .._dims import Dims
from .._eager import ragged_dot_general as _eager_ragged_dot_general
from .._signature import describe, spec_args

_TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@torch.library.custom_op("ragdot::ragged_dot_general", mutates_args=())
def ragged_dot_general(lhs: torch.Tensor, rhs: torch.Tensor, group_sizes: torch.Tensor,
                       group_offset: Optional[torch.Tensor], dims: List[int], out_dtype: Optional[torch.dtype],
                       local_groups: int) -> torch.Tensor:
    """jax.lax.ragged_dot_general on tensors; `dims` is Dims.encode() as a list, local_groups
    -1 without a group offset."""
    return _eager_ragged_dot_general(lhs, rhs, group_sizes, Dims.decode(dims), preferred_element_type=out_dtype,
                                     group_offset=group_offset if local_groups >= 0 else None,
                                     local_groups=local_groups if local_groups >= 0 else None)


@ragged_dot_general.register_fake
def _(lhs, rhs, group_sizes, group_offset, dims, out_dtype, local_groups):
    spec = spec_args(lhs.shape, lhs.dtype, rhs.shape, rhs.dtype, group_sizes.shape, group_sizes.dtype,
                     Dims.decode(dims), out_dtype, local_groups if local_groups >= 0 else None)
    shape, dtype, _ = describe(spec)
    return lhs.new_empty(shape, dtype=_TORCH_DTYPES[dtype])


def _setup_context(ctx, inputs, output):
    lhs, rhs, group_sizes, group_offset, dims, _, local_groups = inputs
    ctx.save_for_backward(lhs, rhs, group_sizes, group_offset)
    ctx.dims, ctx.local_groups = Dims.decode(dims), local_groups


def _run(op, arrays, dtype, gs, offset, local_groups):
    a, b = arrays[op.a], arrays[op.b]
    if not is_identity(op.a_perm):
        a = a.permute(op.a_perm)
    if op.sum_axes:
        out = ragged_dot_general(a.contiguous(), b.contiguous(), gs, offset, [int(v) for v in op.dims.encode()],
                                 torch.float32, local_groups).sum(dim=op.sum_axes).to(dtype)
    else:
        out = ragged_dot_general(a.contiguous(), b.contiguous(), gs, offset, [int(v) for v in op.dims.encode()],
                                 dtype, local_groups)
    return out if is_identity(op.out_perm) else out.permute(op.out_perm)


def _backward(ctx, grad):
    lhs, rhs, gs, offset = ctx.saved_tensors
    dlhs_op, drhs_op = cotangent_ops(ctx.dims, lhs.dim(), rhs.dim(), gs.dim())
    if narrow_cotangent(grad.element_size(), lhs.dtype, rhs.dtype):
        grad = grad.to(lhs.dtype)
    arrays = {"lhs": lhs, "rhs": rhs, "ct": grad}
    dlhs = _run(dlhs_op, arrays, lhs.dtype, gs, offset, ctx.local_groups) if ctx.needs_input_grad[0] else None
    drhs = _run(drhs_op, arrays, rhs.dtype, gs, offset, ctx.local_groups) if ctx.needs_input_grad[1] else None
    return dlhs, drhs, None, None, None, None, None


ragged_dot_general.register_autograd(_backward, setup_context=_setup_context)
