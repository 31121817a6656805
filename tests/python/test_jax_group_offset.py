"""group_offset (unimplemented in jax.lax): ragdot.jax against a NumPy emulation that slices
the groups of one expert-parallel shard, forward and gradients."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ragdot.jax as rj
from ragdot._dims import Dims

GS = np.array([3, 0, 4, 2, 5], np.int32)  # 14 rows, groups 0..4


def shard_rows(offset, local):
    starts = np.concatenate([[0], np.cumsum(GS)])
    return starts[offset], starts[offset + local]


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_mode1_group_offset_matches_slicing(offset):
    rng = np.random.default_rng(offset)
    lhs = rng.standard_normal((16, 6)).astype(np.float32)
    w_local = rng.standard_normal((2, 6, 4)).astype(np.float32)
    out = jax.jit(rj.ragged_dot)(lhs, w_local, GS, group_offset=jnp.array([offset], jnp.int32))
    lo, hi = shard_rows(offset, 2)
    expect = np.zeros((16, 4), np.float32)
    expect[lo:hi] = lax.ragged_dot(lhs[lo:hi], w_local, GS[offset:offset + 2])
    np.testing.assert_allclose(out, expect, atol=1e-5)


@pytest.mark.parametrize("offset", [0, 2])
def test_mode2_group_offset_matches_slicing(offset):
    rng = np.random.default_rng(10 + offset)
    x, dy = rng.standard_normal((16, 3)).astype(np.float32), rng.standard_normal((16, 5)).astype(np.float32)
    dims = Dims((0,), (0,), (), (), (0,), ()).to_jax()
    out = rj.ragged_dot_general(x, dy, GS, dims, group_offset=offset, local_groups=3)
    assert out.shape == (3, 3, 5)
    starts = np.concatenate([[0], np.cumsum(GS)])
    for j in range(3):
        lo, hi = starts[offset + j], starts[offset + j + 1]
        np.testing.assert_allclose(out[j], x[lo:hi].T @ dy[lo:hi], atol=1e-5)


def test_group_offset_gradients_match_the_sliced_problem():
    rng = np.random.default_rng(20)
    lhs = jnp.asarray(rng.standard_normal((16, 6)), jnp.float32)
    w_local = jnp.asarray(rng.standard_normal((2, 6, 4)), jnp.float32)
    offset = 2
    lo, hi = shard_rows(offset, 2)
    ours = jax.grad(lambda x, w: jnp.sum(rj.ragged_dot(x, w, GS, group_offset=offset) ** 2), argnums=(0, 1))(lhs, w_local)
    sliced = lambda x, w: jnp.sum(lax.ragged_dot(x[lo:hi], w, GS[offset:offset + 2]) ** 2)
    theirs = jax.grad(sliced, argnums=(0, 1))(lhs, w_local)
    np.testing.assert_allclose(ours[1], theirs[1], atol=1e-4)
    np.testing.assert_allclose(ours[0][lo:hi], theirs[0][lo:hi], atol=1e-4)
    np.testing.assert_array_equal(ours[0][:lo], 0)
    np.testing.assert_array_equal(ours[0][hi:], 0)
