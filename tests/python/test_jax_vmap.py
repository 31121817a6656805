"""vmap of ragdot.jax over the leading axis of any operand combination, and of its gradient,
against a loop of jax.lax calls. (jax.lax.ragged_dot itself does not batch every case.)"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ragdot.jax as rj
from conftest import CASES, random_case

V = 3


def stacked(name, seeds):
    cases = [random_case(name, s) for s in seeds]
    dims = cases[0][3]
    return [np.stack([c[i] for c in cases]) for i in range(3)], [c[:3] for c in cases], dims


@pytest.mark.parametrize("name", [c[0] for c in CASES])
@pytest.mark.parametrize("mapped", [m for m in itertools.product([0, None], repeat=3) if m != (None,) * 3])
def test_vmap_matches_a_loop(name, mapped):
    batched, per_entry, dims = stacked(name, range(20, 20 + V))
    jdims = dims.to_jax()
    args = [b if m == 0 else e for b, m, e in zip(batched, mapped, per_entry[0])]
    ours = jax.jit(jax.vmap(lambda a, b, g: rj.ragged_dot_general(a, b, g, jdims), in_axes=mapped))(*args)
    pick = lambda i: [b[i] if m == 0 else e for b, m, e in zip(batched, mapped, per_entry[0])]
    theirs = np.stack([lax.ragged_dot_general(*pick(i), jdims) for i in range(V)])
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=1e-4)


def test_vmap_of_gradient_matches_a_loop():
    batched, _, dims = stacked("m1_basic", range(30, 30 + V))
    lhs, rhs, gs = batched
    f = lambda fn: lambda x, w, g: jnp.sum(fn(x, w, g) ** 2)
    ours = jax.jit(jax.vmap(jax.grad(f(rj.ragged_dot), argnums=(0, 1))))(lhs, rhs, gs)
    for i in range(V):
        theirs = jax.grad(f(lax.ragged_dot), argnums=(0, 1))(lhs[i], rhs[i], gs[i])
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o[i], t, atol=1e-4, rtol=1e-4)


def test_nested_vmap():
    lhs = jnp.asarray(np.random.default_rng(1).standard_normal((2, 3, 10, 4)), jnp.float32)
    rhs = jnp.asarray(np.random.default_rng(2).standard_normal((3, 4, 5)), jnp.float32)
    gs = jnp.array([4, 0, 6], jnp.int32)
    ours = jax.vmap(jax.vmap(lambda a: rj.ragged_dot(a, rhs, gs)))(lhs)
    theirs = np.stack([[lax.ragged_dot(b, rhs, gs) for b in a] for a in lhs])
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=1e-4)


def test_vmap_over_group_offset():
    rng = np.random.default_rng(3)
    lhs, rhs = jnp.asarray(rng.standard_normal((12, 4)), jnp.float32), jnp.asarray(rng.standard_normal((2, 4, 3)), jnp.float32)
    gs = jnp.array([3, 2, 4, 3], jnp.int32)
    offsets = jnp.array([[0], [1], [2]], jnp.int32)
    ours = jax.vmap(lambda o: rj.ragged_dot(lhs, rhs, gs, group_offset=o))(offsets)
    for i in range(3):
        np.testing.assert_allclose(ours[i], rj.ragged_dot(lhs, rhs, gs, group_offset=offsets[i]), atol=1e-6)
