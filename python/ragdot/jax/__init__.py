"""ragdot for JAX: drop-in jax.lax.ragged_dot and ragged_dot_general as XLA FFI custom calls.

    import ragdot.jax
    out = ragdot.jax.ragged_dot(x, w, group_sizes)   # under jax.jit, jax.grad, jax.vmap
"""
from ._api import ragged_dot, ragged_dot_general

__all__ = ["ragged_dot", "ragged_dot_general"]
