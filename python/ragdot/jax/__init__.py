"""ragdot for JAX: drop-in jax.lax.ragged_dot and ragged_dot_general as XLA FFI custom calls, and
a lowering of JAX's own ragged dot to them.

    import ragdot.jax
    out = ragdot.jax.ragged_dot(x, w, group_sizes)   # under jax.jit, jax.grad, jax.vmap
    ragdot.jax.enable()                               # jax.lax.ragged_dot itself now runs ragdot

An MoE layer on ragged dots (ragdot.jax.moe) and its expert-parallel form over a device mesh
(ragdot.jax.expert_parallel: shard_map, ragged all-to-all, group_offset):

    y = ragdot.jax.expert_parallel_moe(x, params, ragdot.jax.expert_mesh(), top_k=2)
"""
import os as _os

from ._api import ragged_dot, ragged_dot_general
from ._lowering import disable, enable, enabled, is_enabled
from . import expert_parallel, moe
from .expert_parallel import expert_mesh, expert_parallel_moe, expert_parallel_moe_shard
from .moe import MoeParams, moe_layer

__all__ = ["ragged_dot", "ragged_dot_general", "enable", "disable", "enabled", "is_enabled", "expert_parallel", "moe",
           "expert_mesh", "expert_parallel_moe", "expert_parallel_moe_shard", "MoeParams", "moe_layer"]

if _os.environ.get("RAGDOT_JAX_LOWERING") == "1":  # whole programs, without code changes
    enable()
