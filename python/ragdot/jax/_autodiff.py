"""Reverse-mode autodiff of a ragdot call: a custom VJP whose cotangents are ragdot calls too
(ragdot/_cotangents.py: in the forward mode, dlhs by mode 1 and drhs by mode 2)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .._cotangents import cotangent_ops, is_identity, narrow_cotangent
from .._signature import dtype_name
from ._call import Static, core


def _run(op, arrays, primal_dtype, static: Static, gs, offset):
    a, b = arrays[op.a], arrays[op.b]
    if not is_identity(op.a_perm):
        a = jnp.transpose(a, op.a_perm)
    if op.sum_axes:
        out = core(Static(op.dims, "f32", static.local_groups))(a, b, gs, offset)
        out = jnp.sum(out, axis=op.sum_axes).astype(primal_dtype)
    else:
        out = core(Static(op.dims, dtype_name(primal_dtype), static.local_groups))(a, b, gs, offset)
    return out if is_identity(op.out_perm) else jnp.transpose(out, op.out_perm)


@functools.lru_cache(maxsize=None)
def differentiable(static: Static):
    """f(lhs, rhs, group_sizes, group_offset) -> out with a custom VJP."""
    call = core(static)

    @jax.custom_vjp
    def f(lhs, rhs, gs, offset):
        return call(lhs, rhs, gs, offset)

    def fwd(lhs, rhs, gs, offset):
        return call(lhs, rhs, gs, offset), (lhs, rhs, gs, offset)

    def bwd(residuals, ct):
        lhs, rhs, gs, offset = residuals
        dlhs_op, drhs_op = cotangent_ops(static.dims, lhs.ndim, rhs.ndim, gs.ndim)
        if narrow_cotangent(ct.dtype.itemsize, lhs.dtype, rhs.dtype):
            ct = ct.astype(lhs.dtype)
        arrays = {"lhs": lhs, "rhs": rhs, "ct": ct}
        dlhs = _run(dlhs_op, arrays, lhs.dtype, static, gs, offset)
        drhs = _run(drhs_op, arrays, rhs.dtype, static, gs, offset)
        return dlhs, drhs, None, None

    f.defvjp(fwd, bwd)
    return f
