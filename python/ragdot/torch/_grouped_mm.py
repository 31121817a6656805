"""ragdot::grouped_mm: torch._grouped_mm's signature and offsets convention (offs holds the
cumulative end of each group, int32), registered with torch.library as a composite of
ragdot::ragged_dot_general, so autograd and torch.compile see through it.

  mat_a 2D [M, K],  mat_b 3D [G, K, N], offs over M -> [M, N]     (MoE forward; mode 1)
  mat_a 2D [M, K],  mat_b 2D [K, N],    offs over K -> [G, M, N]  (weight gradient; mode 2)
  mat_a 3D [G, M, K], mat_b 2D [K, N],  offs over N -> [M, N]     (mode 1 on the transpose)
  mat_a 3D [G, M, K], mat_b 3D [G, K, N], no offs   -> [G, M, N]  (batched; mode 3)
"""
from __future__ import annotations

import torch

from .._dims import Dims
from ._op import ragged_dot_general

_FORWARD = Dims((1,), (1,), (), (), (0,), (0,))
_WEIGHT_GRADIENT = Dims((1,), (0,), (), (), (1,), ())
_RAGGED_N = Dims((0,), (2,), (), (), (1,), (0,))
_BATCHED = Dims((2,), (1,), (0,), (0,), (0,), ())

_lib = torch.library.Library("ragdot", "FRAGMENT")
_lib.define("grouped_mm(Tensor mat_a, Tensor mat_b, Tensor? offs=None, Tensor? bias=None, "
            "ScalarType? out_dtype=None) -> Tensor")


def _call(lhs, rhs, group_sizes, dims: Dims, out_dtype):
    return ragged_dot_general(lhs, rhs, group_sizes, None, [int(v) for v in dims.encode()], out_dtype, -1)


def _sizes_from_offsets(offs):
    return torch.diff(offs.to(torch.int32), prepend=offs.new_zeros(1, dtype=torch.int32)).to(torch.int32)


def _grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    if bias is not None:
        raise ValueError("ragdot.torch.grouped_mm does not take a bias (neither does torch._grouped_mm)")
    a_dim, b_dim = mat_a.dim(), mat_b.dim()
    if (a_dim, b_dim) == (3, 3):
        if offs is not None:
            raise ValueError("grouped_mm of two 3D tensors is a batched matmul and takes no offs")
        sizes = torch.tensor([mat_a.shape[0]], dtype=torch.int32, device=mat_a.device)
        return _call(mat_a, mat_b, sizes, _BATCHED, out_dtype)
    if (a_dim, b_dim) not in ((2, 3), (2, 2), (3, 2)):
        raise ValueError(f"grouped_mm takes 2D or 3D tensors, got {a_dim}D and {b_dim}D")
    if offs is None:
        raise ValueError("grouped_mm needs offs when either tensor is 2D")
    sizes = _sizes_from_offsets(offs)
    if (a_dim, b_dim) == (2, 3):
        return _call(mat_a, mat_b, sizes, _FORWARD, out_dtype)
    if (a_dim, b_dim) == (2, 2):
        return _call(mat_a, mat_b, sizes, _WEIGHT_GRADIENT, out_dtype)
    return _call(mat_b, mat_a, sizes, _RAGGED_N, out_dtype).t()


_lib.impl("grouped_mm", _grouped_mm, "CompositeImplicitAutograd")


def grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    """torch._grouped_mm computed by ragdot, differentiable in mat_a and mat_b. Unlike
    torch._grouped_mm, rows (or columns) past offs[-1] are zero and every GPU runs it."""
    return torch.ops.ragdot.grouped_mm(mat_a, mat_b, offs, bias, out_dtype)
