"""ragdot.jax against jax.lax: values and dtypes of ragged_dot and ragged_dot_general in all
three modes, on random shapes with empty groups, eager and under jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ragdot.jax as rj
from conftest import CASES, random_case

TOL = {jnp.float32: 1e-4, jnp.bfloat16: 5e-2, jnp.float16: 1e-2}


def both(name, seed, dtype=jnp.float32, preferred=None):
    lhs, rhs, gs, dims = random_case(name, seed)
    lhs, rhs = jnp.asarray(lhs, dtype), jnp.asarray(rhs, dtype)
    jdims = dims.to_jax()
    ours = jax.jit(lambda a, b, g: rj.ragged_dot_general(a, b, g, jdims, preferred_element_type=preferred))(lhs, rhs, gs)
    theirs = lax.ragged_dot_general(lhs, rhs, gs, jdims, preferred_element_type=preferred)
    return ours, theirs


@pytest.mark.parametrize("name", [c[0] for c in CASES])
@pytest.mark.parametrize("seed", range(3))
def test_values_match_jax(name, seed):
    ours, theirs = both(name, seed)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["m1_basic", "m2_basic", "m3_basic", "m1_batch"])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("preferred", [None, jnp.float32])
def test_dtypes_and_preferred_element_type_match_jax(name, dtype, preferred):
    ours, theirs = both(name, 7, dtype, preferred)
    assert ours.dtype == theirs.dtype
    tol = TOL[preferred or dtype]
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32), atol=tol * 8, rtol=tol)


@pytest.mark.parametrize("lhs_dtype, rhs_dtype", [(jnp.bfloat16, jnp.float32), (jnp.float16, jnp.bfloat16)])
def test_mixed_input_dtypes_follow_jax(lhs_dtype, rhs_dtype):
    lhs, rhs, gs, _ = random_case("m1_basic", 3)
    a, b = jnp.asarray(lhs, lhs_dtype), jnp.asarray(rhs, rhs_dtype)
    ours, theirs = rj.ragged_dot(a, b, gs), lax.ragged_dot(a, b, gs)
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32), atol=0.2, rtol=0.05)


def test_ragged_dot_signature_matches_jax():
    import inspect

    ours = list(inspect.signature(rj.ragged_dot).parameters)
    theirs = list(inspect.signature(lax.ragged_dot).parameters)
    assert ours == theirs
    assert list(inspect.signature(rj.ragged_dot_general).parameters)[:8] == \
        list(inspect.signature(lax.ragged_dot_general).parameters)


def test_rows_past_the_group_sizes_are_zero():
    lhs, rhs = jnp.ones((8, 3)), jnp.ones((2, 3, 4))
    out = rj.ragged_dot(lhs, rhs, jnp.array([2, 3], jnp.int32))
    np.testing.assert_array_equal(out[5:], 0)
    np.testing.assert_array_equal(out[:5], 3)


def test_bad_shapes_raise_value_error_at_trace_time():
    with pytest.raises(ValueError, match="contracting dimension"):
        jax.jit(rj.ragged_dot).lower(jnp.ones((8, 3)), jnp.ones((2, 4, 4)), jnp.array([2, 3], jnp.int32))


def test_unsupported_dtype_raises_type_error():
    with pytest.raises(TypeError):
        rj.ragged_dot(jnp.ones((8, 3), jnp.int32), jnp.ones((2, 3, 4), jnp.int32), jnp.array([2, 3], jnp.int32))
