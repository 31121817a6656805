"""Shared helpers for the Python tests: random ragged-dot cases over all three modes (with
empty groups and group sizes that cover only part of the ragged dimension) and the GPU mark."""
import os

import numpy as np
import pytest

# JAX computes on the CPU by default; with RAGDOT_TEST_GPU=1 the GPU is there too, and the GPU
# tests put their arrays on it (the CPU tests keep CPU tolerances and the CPU handler).
if os.environ.get("RAGDOT_TEST_GPU") != "1":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
else:
    # several test processes share the GPU with PyTorch and CuPy: JAX takes memory as it goes
    # rather than 75% of the device up front
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax

        jax.config.update("jax_default_device", jax.devices("cpu")[0])
    except ImportError:
        pass

from ragdot._dims import Dims  # noqa: E402

# (name, lhs shape, rhs shape, dims, group-size prefix shape, ragged extent); g is the last
# group-size dim. The same layouts as tests/data/make_jax_golden.py, plus the MoE shapes.
CASES = [
    ("m1_basic", (13, 8), (4, 8, 6), Dims((1,), (1,), (), (), (0,), (0,)), (), 13),
    ("m1_rhs_nk", (11, 5), (3, 7, 5), Dims((1,), (2,), (), (), (0,), (0,)), (), 11),
    ("m1_batch", (2, 9, 4), (3, 4, 5, 2), Dims((2,), (1,), (0,), (3,), (1,), (0,)), (2,), 9),
    ("m1_multi", (3, 7, 2, 4), (2, 4, 3, 2), Dims((3, 2), (1, 3), (), (), (1,), (0,)), (3,), 7),
    ("m1_inner", (6, 2, 3), (3, 3, 4), Dims((2,), (1,), (), (), (0,), (0,)), (), 6),
    ("m2_basic", (12, 5), (12, 6), Dims((0,), (0,), (), (), (0,), ()), (), 12),
    ("m2_prefix", (2, 3, 7, 2), (2, 7, 3, 4), Dims((1, 2), (2, 1), (0,), (0,), (2,), ()), (2, 3), 7),
    ("m2_mk", (3, 9), (9, 2), Dims((1,), (0,), (), (), (1,), ()), (), 9),
    ("m3_basic", (6, 2, 3), (6, 3, 2), Dims((2,), (1,), (0,), (0,), (0,), ()), (), 6),
    ("m3_two_batch", (2, 3, 2, 2), (3, 2, 2, 3), Dims((3,), (2,), (1, 0), (0, 1), (0,), ()), (3,), 2),
]
GROUPS = {"m1_basic": 4, "m1_rhs_nk": 3, "m1_batch": 3, "m1_multi": 2, "m1_inner": 3, "m2_basic": 5,
          "m2_prefix": 3, "m2_mk": 4, "m3_basic": 3, "m3_two_batch": 2}


def random_group_sizes(rng, prefix, groups, extent, partial=True, broadcast=False):
    """Sizes per prefix entry summing to at most `extent`, with empty groups among them."""
    rows = int(np.prod(prefix)) if prefix and not broadcast else 1
    out = []
    for _ in range(rows):
        total = int(rng.integers(0, extent + 1)) if partial else extent
        cuts = np.sort(rng.integers(0, total + 1, size=groups - 1))
        sizes = np.diff(np.concatenate([[0], cuts, [total]]))
        sizes[rng.random(groups) < 0.25] = 0  # more empty groups; the sum only shrinks
        out.append(sizes)
    shape = (tuple(prefix) if prefix and not broadcast else ()) + (groups,)
    return np.stack(out).reshape(shape).astype(np.int32)


def random_case(name, seed, dtype=np.float32, partial=True):
    _, lhs_shape, rhs_shape, dims, prefix, extent = next(c for c in CASES if c[0] == name)
    rng = np.random.default_rng(seed)
    lhs = rng.standard_normal(lhs_shape).astype(dtype)
    rhs = rng.standard_normal(rhs_shape).astype(dtype)
    # mode 3 follows dot_general: JAX needs its sizes to cover the batch exactly
    gs = random_group_sizes(rng, prefix, GROUPS[name], extent, partial=partial and dims.mode() != 3)
    return lhs, rhs, gs, dims


def has_gpu():
    try:
        import ragdot

        return any(b["name"] == "cuda" and b["available"] for b in ragdot.backends())
    except ImportError:
        return False


gpu = pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")
