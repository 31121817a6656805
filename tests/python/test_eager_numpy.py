"""ragdot.ragged_dot(_general) on NumPy arrays, against a NumPy reference."""
import ml_dtypes
import numpy as np
import pytest

import ragdot
from conftest import CASES, random_case, random_group_sizes


def reference_ragged_dot(lhs, rhs, gs, offset=0):
    out = np.zeros((lhs.shape[0], rhs.shape[2]), np.float64)
    starts = np.concatenate([[0], np.cumsum(gs)])
    for g in range(rhs.shape[0]):
        lo, hi = starts[offset + g], starts[offset + g + 1]
        out[lo:hi] = lhs[lo:hi].astype(np.float64) @ rhs[g].astype(np.float64)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_ragged_dot_matches_reference(seed):
    rng = np.random.default_rng(seed)
    m, k, n, g = rng.integers(1, 40), rng.integers(1, 20), rng.integers(1, 20), rng.integers(1, 6)
    lhs = rng.standard_normal((m, k)).astype(np.float32)
    rhs = rng.standard_normal((g, k, n)).astype(np.float32)
    gs = random_group_sizes(rng, (), g, m)
    np.testing.assert_allclose(ragdot.ragged_dot(lhs, rhs, gs), reference_ragged_dot(lhs, rhs, gs), atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_dtypes_keep_their_dtype(dtype):
    rng = np.random.default_rng(1)
    lhs, rhs = rng.standard_normal((9, 8)).astype(dtype), rng.standard_normal((3, 8, 5)).astype(dtype)
    gs = np.array([4, 0, 5], np.int32)
    out = ragdot.ragged_dot(lhs, rhs, gs)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float32), reference_ragged_dot(lhs, rhs, gs), atol=0.1, rtol=0.02)
    wide = ragdot.ragged_dot(lhs, rhs, gs, preferred_element_type=np.float32)
    assert wide.dtype == np.float32


def test_group_offset_computes_one_shard():
    rng = np.random.default_rng(2)
    lhs, rhs = rng.standard_normal((12, 4)).astype(np.float32), rng.standard_normal((4, 4, 3)).astype(np.float32)
    gs = np.array([2, 3, 0, 7], np.int32)
    out = ragdot.ragged_dot(lhs, rhs[1:3], gs, group_offset=1)
    full = reference_ragged_dot(lhs, rhs, gs)
    np.testing.assert_allclose(out[2:5], full[2:5], atol=1e-5)
    assert not out[:2].any() and not out[5:].any()


def test_plans_are_cached_per_signature():
    ragdot.clear_plan_cache()
    lhs, rhs, gs = np.ones((6, 2), np.float32), np.ones((2, 2, 3), np.float32), np.array([3, 3], np.int32)
    for _ in range(3):
        ragdot.ragged_dot(lhs, rhs, gs)
    assert ragdot.plan_cache_size() == 1
    ragdot.ragged_dot(lhs[:5], rhs, np.array([2, 3], np.int32))
    assert ragdot.plan_cache_size() == 2


def test_named_backend_is_used():
    lhs, rhs, gs = np.ones((6, 2), np.float32), np.ones((2, 2, 3), np.float32), np.array([3, 3], np.int32)
    np.testing.assert_array_equal(ragdot.ragged_dot(lhs, rhs, gs, backend="cpu_ref"), np.full((6, 3), 2.0))


@pytest.mark.parametrize("make_call, error, words", [
    (lambda: ragdot.ragged_dot(np.ones((6, 2), np.float32), np.ones((2, 3, 3), np.float32), np.ones(2, np.int32)),
     ValueError, "contracting dimension"),
    (lambda: ragdot.ragged_dot(np.ones((6, 2)), np.ones((2, 2, 3)), np.ones(2, np.int32)), TypeError, "f64"),
    (lambda: ragdot.ragged_dot(np.ones((6, 2), np.float32), np.ones((2, 2, 3), np.float32), np.ones(2, np.float32)),
     TypeError, "group_sizes"),
    (lambda: ragdot.ragged_dot(np.ones((6, 2), np.float32), np.ones((3, 2, 3), np.float32), np.ones(2, np.int32)),
     ValueError, "group dimension"),
    (lambda: ragdot.ragged_dot(np.ones((6, 2), np.float32), np.ones((2, 2, 3), np.float32), np.array([5, 5], np.int32)),
     ValueError, "sum"),
    (lambda: ragdot.ragged_dot_general(np.ones((6, 2), np.float32), np.ones((2, 2, 3), np.float32),
                                       np.ones(2, np.int32), "not dims"), TypeError, "RaggedDotDimensionNumbers"),
    (lambda: ragdot.ragged_dot(np.ones((6, 2), np.float32), np.ones((2, 2, 3), np.float32), np.ones(2, np.int32),
                               backend="nope"), ValueError, "no backend named"),
])
def test_bad_input_raises_a_clear_python_error(make_call, error, words):
    with pytest.raises(error, match=words):
        make_call()


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_every_mode_and_layout_matches_jax(name):
    """ragdot.ragged_dot_general on NumPy arrays against jax.lax on the CPU, for all the parity
    layouts (m2_prefix takes the batched-and-summed path of group sizes along a contracting dim)."""
    jax = pytest.importorskip("jax")
    lhs, rhs, gs, dims = random_case(name, 31)
    theirs = jax.lax.ragged_dot_general(lhs, rhs, gs, dims.to_jax(), precision=jax.lax.Precision.HIGHEST)
    ours = ragdot.ragged_dot_general(lhs, rhs, gs, dims.to_jax())
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-5, atol=1e-5)
