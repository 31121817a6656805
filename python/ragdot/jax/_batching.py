"""vmap of a ragdot call: the mapped axis becomes one more dimension of the same ragged dot,
so a vmapped call is still one Group-GEMM.

  only lhs mapped (mode 1 also with group sizes): a free lhs dimension (no copy of rhs, the
      weights; in mode 1 it is ahead of the ragged one, so per-entry group sizes index it)
  only rhs mapped: a free rhs dimension
  otherwise: a new leading batch pair; an unmapped lhs or rhs is broadcast to it
  a mapped group offset: one call per entry (lax.map), as the offset is a scalar of the call
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .._dims import Dims
from .._prefix import full_group_sizes_shape


def _shift(dims, by=1):
    return tuple(d + by for d in dims)


def _fit_group_sizes(gs, gs_batched, new_dims: Dims, lhs_shape, axis_in_prefix, axis_size):
    """Group sizes for the new call: rank 1 when unmapped and rank 1, else the full prefix shape
    with the mapped axis at `axis_in_prefix`."""
    if not gs_batched and gs.ndim == 1:
        return gs
    if not gs_batched:
        gs = jnp.broadcast_to(gs, (axis_size,) + gs.shape)
    full = full_group_sizes_shape(new_dims, lhs_shape, gs.shape[-1])
    gs = jnp.moveaxis(gs, 0, axis_in_prefix) if gs.ndim == len(full) else gs
    if gs.ndim < len(full):  # [V, g] mapped over a prefix of more dims: broadcast the rest
        gs = gs.reshape(gs.shape[:1] + (1,) * (len(full) - 2) + gs.shape[-1:])
        gs = jnp.moveaxis(gs, 0, axis_in_prefix)
    return jnp.broadcast_to(gs, full)


def batching_rule(static, axis_size, in_batched, lhs, rhs, gs, offset):
    from ._call import Static, core

    lb, rb, gb, ob = in_batched
    d = static.dims
    mode = d.mode()
    if ob:
        def one(args):
            return core(static)(*args)

        bcast = [x if b else jnp.broadcast_to(x, (axis_size,) + x.shape) for x, b in zip((lhs, rhs, gs, offset), in_batched)]
        return jax.lax.map(one, tuple(bcast)), True

    n_batch = len(d.lhs_batch)
    if lb and not rb and (not gb or mode == 1):
        nd = Dims(_shift(d.lhs_contracting), d.rhs_contracting, _shift(d.lhs_batch), d.rhs_batch,
                  _shift(d.lhs_ragged), d.rhs_group)
        if mode == 1:  # the new dim is ahead of the ragged one: a group-size prefix dim
            gs = _fit_group_sizes(gs, gb, nd, lhs.shape, n_batch, axis_size)
        out = core(Static(nd, static.out_dtype, static.local_groups))(lhs, rhs, gs, offset)
        return jnp.moveaxis(out, (1 if mode == 2 else 0) + n_batch, 0), True
    if rb and not lb and not gb:
        nd = Dims(d.lhs_contracting, _shift(d.rhs_contracting), d.lhs_batch, _shift(d.rhs_batch), d.lhs_ragged,
                  _shift(d.rhs_group))
        n_lfree = lhs.ndim - n_batch - len(d.lhs_contracting)
        out = core(Static(nd, static.out_dtype, static.local_groups))(lhs, rhs, gs, offset)
        return jnp.moveaxis(out, (1 if mode == 2 else 0) + n_batch + n_lfree, 0), True

    if not lb:
        lhs = jnp.broadcast_to(lhs, (axis_size,) + lhs.shape)
    if not rb:
        rhs = jnp.broadcast_to(rhs, (axis_size,) + rhs.shape)
    nd = Dims(_shift(d.lhs_contracting), _shift(d.rhs_contracting), (0,) + _shift(d.lhs_batch),
              (0,) + _shift(d.rhs_batch), _shift(d.lhs_ragged), _shift(d.rhs_group))
    gs = _fit_group_sizes(gs, gb, nd, lhs.shape, 0, axis_size)
    out = core(Static(nd, static.out_dtype, static.local_groups))(lhs, rhs, gs, offset)
    return (jnp.moveaxis(out, 1, 0) if mode == 2 else out), True
