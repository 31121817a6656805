"""ragdot for JAX: drop-in jax.lax.ragged_dot and ragged_dot_general as XLA FFI custom calls, and
a lowering of JAX's own ragged dot to them.

    import ragdot.jax
    out = ragdot.jax.ragged_dot(x, w, group_sizes)   # under jax.jit, jax.grad, jax.vmap
    ragdot.jax.enable()                               # jax.lax.ragged_dot itself now runs ragdot
"""
import os as _os

from ._api import ragged_dot, ragged_dot_general
from ._lowering import disable, enable, enabled, is_enabled

__all__ = ["ragged_dot", "ragged_dot_general", "enable", "disable", "enabled", "is_enabled"]

if _os.environ.get("RAGDOT_JAX_LOWERING") == "1":  # whole programs, without code changes
    enable()
