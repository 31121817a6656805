"""jax.lax as the oracle for ragdot.jax's gradients, in every mode: jax.grad where JAX has the
rule, else the gradient built from forward values (JAX lacks the mode-2 rule and part of mode 3's)."""
import jax
import jax.numpy as jnp
from jax import lax


def loss(fn, dims, gs, cot):
    return lambda a, b: jnp.sum(fn(a, b, gs, dims) * cot)


def linear_gradient(fn, operands, argnum, cot):
    """d sum(fn(*operands) * cot) / d operands[argnum] from fn's forward values alone: fn is linear
    in each operand, so entry i of the gradient is the loss at the i-th basis array. Used where
    jax.lax has no gradient (NotImplementedError in JAX)."""
    x = operands[argnum]
    basis = jnp.eye(x.size, dtype=x.dtype).reshape((x.size,) + x.shape)

    def at(e):
        args = list(operands)
        args[argnum] = e
        return jnp.sum(fn(*args) * cot)

    return jax.jit(lambda: jax.lax.map(at, basis))().reshape(x.shape)


def jax_gradients(lhs, rhs, gs, jdims, cot):
    try:
        return jax.grad(loss(lax.ragged_dot_general, jdims, gs, cot), argnums=(0, 1))(lhs, rhs)
    except NotImplementedError:
        fn = lambda a, b: lax.ragged_dot_general(a, b, gs, jdims)
        return tuple(linear_gradient(fn, (lhs, rhs), i, cot) for i in (0, 1))
