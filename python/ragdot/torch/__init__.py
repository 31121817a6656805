"""ragdot for PyTorch: torch.library ops with autograd, on CPU and CUDA tensors.

    import ragdot.torch
    out = ragdot.torch.grouped_mm(x, w, offs=offs)      # torch._grouped_mm's convention
    torch.ops.ragdot.ragged_dot_general(...)            # the general op it is built on
"""
from ._grouped_mm import grouped_mm
from ._op import ragged_dot_general

__all__ = ["grouped_mm", "ragged_dot_general"]
