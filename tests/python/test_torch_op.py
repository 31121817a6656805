"""ragdot.torch.grouped_mm against torch._grouped_mm's convention (computed here with plain
matmuls, as torch._grouped_mm itself needs a recent GPU), values and autograd."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ragdot.torch as rt  # noqa: E402


def offsets(sizes, device="cpu"):
    return torch.tensor(np.cumsum(sizes), dtype=torch.int32, device=device)


def reference_2d_3d(a, b, sizes):
    out, start = torch.zeros(a.shape[0], b.shape[2], dtype=a.dtype), 0
    for g, s in enumerate(sizes):
        out[start:start + s] = a[start:start + s] @ b[g]
        start += s
    return out


def test_forward_and_gradients_2d_3d():
    torch.manual_seed(0)
    sizes = [3, 0, 5, 2]
    a = torch.randn(12, 6, requires_grad=True)
    b = torch.randn(4, 6, 5, requires_grad=True)
    ours = rt.grouped_mm(a, b, offs=offsets(sizes))
    theirs = reference_2d_3d(a, b, sizes)
    torch.testing.assert_close(ours, theirs)
    cot = torch.randn_like(ours)
    ga, gb = torch.autograd.grad((ours * cot).sum(), (a, b))
    ra, rb = torch.autograd.grad((theirs * cot).sum(), (a, b))
    torch.testing.assert_close(ga, ra)
    torch.testing.assert_close(gb, rb)


def test_2d_2d_is_the_weight_gradient():
    torch.manual_seed(1)
    sizes = [4, 0, 6]
    a, b = torch.randn(3, 10), torch.randn(10, 5)
    out = rt.grouped_mm(a, b, offs=offsets(sizes))
    assert out.shape == (3, 3, 5)
    start = 0
    for g, s in enumerate(sizes):
        torch.testing.assert_close(out[g], a[:, start:start + s] @ b[start:start + s])
        start += s


def test_3d_2d_and_3d_3d():
    torch.manual_seed(2)
    sizes = [2, 3]
    a, b = torch.randn(2, 4, 6), torch.randn(6, 5)
    out = rt.grouped_mm(a, b, offs=offsets(sizes))
    torch.testing.assert_close(out[:, :2], a[0] @ b[:, :2])
    torch.testing.assert_close(out[:, 2:], a[1] @ b[:, 2:])
    c = torch.randn(2, 6, 3)
    torch.testing.assert_close(rt.grouped_mm(a, c), torch.bmm(a, c))


def test_opcheck():
    a, b = torch.randn(8, 4, requires_grad=True), torch.randn(2, 4, 3, requires_grad=True)
    dims = [1, 1, 1, 1, 0, 0, 1, 0, 1, 0]
    torch.library.opcheck(torch.ops.ragdot.ragged_dot_general,
                          (a, b, torch.tensor([3, 5], dtype=torch.int32), None, dims, None, -1))


def test_bad_input_raises():
    with pytest.raises(ValueError):
        rt.grouped_mm(torch.randn(8, 4), torch.randn(2, 4, 3))
    with pytest.raises(ValueError, match="contracting"):
        rt.grouped_mm(torch.randn(8, 4), torch.randn(2, 5, 3), offs=offsets([4, 4]))
