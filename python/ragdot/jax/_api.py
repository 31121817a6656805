"""ragdot.jax.ragged_dot and ragged_dot_general: jax.lax's signature and semantics, computed by
ragdot's XLA custom calls (CPU and CUDA), under jit, grad and vmap."""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from .._dims import RAGGED_DOT, normalize
from .._reduce_dims import reduce_as_batch
from .._signature import default_local_groups, dtype_name
from ._autodiff import differentiable
from ._call import Static, out_aval


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None, *,
                       local_groups: Optional[int] = None):
    """jax.lax.ragged_dot_general, computed by ragdot.

    Beyond jax.lax: `group_offset` (an int32 array of shape [1], or an int) computes only the
    groups [offset, offset + local_groups): in mode 1 rhs's group dimension holds those
    local_groups groups and rows of other groups are zero; in mode 2 the output's leading
    dimension has local_groups entries (`local_groups` must then be given unless it is all
    groups). `precision` is accepted and ignored: ragdot accumulates in float32. `out_sharding`,
    as in jax.lax, constrains the output's sharding.
    """
    dims = normalize(ragged_dot_dimension_numbers)
    lhs, rhs, group_sizes = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    if group_offset is None:
        lg, offset = -1, jnp.zeros((1,), jnp.int32)
    else:
        lg = default_local_groups(dims, rhs.shape, group_sizes.shape, local_groups)
        offset = jnp.asarray(group_offset, jnp.int32).reshape(1)
    preferred = None if preferred_element_type is None else dtype_name(preferred_element_type)
    probe = Static(dims, preferred, lg)
    out_dtype = dtype_name(out_aval(probe, lhs, rhs, group_sizes).dtype)  # validates the signature
    batched = reduce_as_batch(dims)
    if batched is None:
        out = differentiable(Static(dims, out_dtype, lg))(lhs, rhs, group_sizes, offset)
    else:  # group sizes vary along a contracting dim: a batched op, summed (ragdot/_reduce_dims.py)
        out = differentiable(Static(batched.dims, "f32", lg))(lhs, rhs, group_sizes, offset)
        out = jnp.sum(out, axis=batched.sum_axes).astype(out_aval(probe, lhs, rhs, group_sizes).dtype)
    return out if out_sharding is None else jax.lax.with_sharding_constraint(out, out_sharding)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None,
               out_sharding=None):
    """jax.lax.ragged_dot: lhs [m, k], rhs [g, k, n], group_sizes [g] -> [m, n], by ragdot."""
    return ragged_dot_general(lhs, rhs, group_sizes, RAGGED_DOT, precision, preferred_element_type, group_offset,
                              out_sharding)
