"""ragdot.ragged_dot(..., lhs_rows=...): the lhs read as rows of a table through an index, on the
host (NumPy and, when installed, PyTorch CPU tensors), against the rows gathered first."""
import numpy as np
import pytest

import ragdot
from conftest import random_group_sizes


def gathered(table, rows):
    """table[rows], with zero rows where an index is outside the table."""
    inside = (rows >= 0) & (rows < table.shape[0])
    out = np.zeros((rows.shape[0], table.shape[1]), table.dtype)
    out[inside] = table[rows[inside]]
    return out


def case(seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    r, m, k, n, g = 13, 57, 24, 20, 4
    table = rng.standard_normal((r, k)).astype(dtype)
    rows = rng.integers(0, r, m).astype(np.int32)
    rows[::9] = -1  # outside the table: zeros
    rows[4::11] = r
    rhs = rng.standard_normal((g, k, n)).astype(dtype)
    gs = random_group_sizes(rng, (), g, m)
    return table, rows, rhs, gs


@pytest.mark.parametrize("backend", [None, "cpu", "cpu_ref"])
@pytest.mark.parametrize("seed", range(3))
def test_matches_the_rows_gathered_first(backend, seed):
    table, rows, rhs, gs = case(seed)
    got = ragdot.ragged_dot(table, rhs, gs, backend=backend, lhs_rows=rows)
    want = ragdot.ragged_dot(gathered(table, rows), rhs, gs, backend=backend)
    assert got.shape == (rows.shape[0], rhs.shape[2])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_group_offset():
    table, rows, rhs, gs = case(7)
    got = ragdot.ragged_dot(table, rhs[1:3], gs, group_offset=1, lhs_rows=rows)
    want = ragdot.ragged_dot(gathered(table, rows), rhs[1:3], gs, group_offset=1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_bad_index_arrays_are_errors():
    table, rows, rhs, gs = case(3)
    with pytest.raises(TypeError, match="int32"):
        ragdot.ragged_dot(table, rhs, gs, lhs_rows=rows.astype(np.int64))
    with pytest.raises(ValueError):
        ragdot.ragged_dot(table, rhs, gs, lhs_rows=rows.reshape(1, -1))
    with pytest.raises(ValueError):
        ragdot.ragged_dot(table[None], rhs, gs, lhs_rows=rows)
    with pytest.raises(TypeError, match="gather"):  # a backend that does not gather says so
        ragdot.ragged_dot(table, rhs, gs, backend="padded", lhs_rows=rows)


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    table, rows, rhs, gs = case(11)
    got = ragdot.ragged_dot(torch.from_numpy(table), torch.from_numpy(rhs), torch.from_numpy(gs),
                            lhs_rows=torch.from_numpy(rows))
    want = ragdot.ragged_dot(gathered(table, rows), rhs, gs)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
