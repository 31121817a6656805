"""Gradients of ragdot.jax: equal to jax.lax's in all three modes and dimension layouts, and
checked numerically with jax.test_util.check_grads."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import ragdot.jax as rj
from conftest import CASES, random_case
from jax_reference import jax_gradients, loss


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_gradients_match_jax(name):
    lhs, rhs, gs, dims = random_case(name, 11)
    jdims = dims.to_jax()
    out = lax.ragged_dot_general(lhs, rhs, gs, jdims)
    cot = jnp.asarray(np.random.default_rng(5).standard_normal(out.shape), jnp.float32)
    ours = jax.jit(jax.grad(loss(rj.ragged_dot_general, jdims, gs, cot), argnums=(0, 1)))(lhs, rhs)
    theirs = jax_gradients(jnp.asarray(lhs), jnp.asarray(rhs), gs, jdims, cot)
    for o, t in zip(ours, theirs):
        assert o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_allclose(o, t, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["m1_basic", "m1_batch", "m2_prefix", "m3_basic"])
def test_check_grads(name):
    lhs, rhs, gs, dims = random_case(name, 12)
    jdims = dims.to_jax()
    check_grads(lambda a, b: rj.ragged_dot_general(a, b, gs, jdims), (lhs, rhs), order=1, modes=["rev"],
                atol=5e-2, rtol=5e-2)


def test_bf16_gradients_keep_primal_dtypes():
    lhs, rhs, gs, _ = random_case("m1_basic", 13)
    a, b = jnp.asarray(lhs, jnp.bfloat16), jnp.asarray(rhs, jnp.bfloat16)
    f = lambda fn: lambda x, w: jnp.sum(fn(x, w, gs, preferred_element_type=jnp.float32) ** 2)
    ours = jax.grad(f(rj.ragged_dot), argnums=(0, 1))(a, b)
    theirs = jax.grad(f(lax.ragged_dot), argnums=(0, 1))(a, b)
    for o, t in zip(ours, theirs):
        assert o.dtype == t.dtype == jnp.bfloat16
        np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(t, np.float32), atol=0.5, rtol=0.05)


def test_gradient_program_uses_ragdot_for_both_cotangents():
    lhs, rhs, gs, _ = random_case("m1_basic", 14)
    f = lambda x, w: jnp.sum(rj.ragged_dot(x, w, gs) ** 2)
    text = jax.jit(jax.grad(f, argnums=(0, 1))).lower(lhs, rhs).as_text()
    assert text.count("ragdot_ragged_dot_general") == 3  # forward, dlhs (mode 1), drhs (mode 2)
