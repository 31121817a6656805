"""ragdot: jax.lax.ragged_dot_general, the ragged dot of Mixture-of-Experts layers, as a Group-GEMM.

    ragdot.ragged_dot(lhs, rhs, group_sizes)            NumPy, PyTorch or CuPy arrays
    ragdot.jax.ragged_dot(lhs, rhs, group_sizes)        JAX: XLA custom call, jit/grad/vmap
    ragdot.torch.grouped_mm(a, b, offs=offs)            PyTorch: torch.library op with autograd

`ragdot.jax` and `ragdot.torch` are imported on first use, so neither framework is needed for
the other or for NumPy.
"""
from ._dims import RaggedDotDimensionNumbers
from ._eager import ragged_dot, ragged_dot_general
from ._native import __version__, backends, clear_plan_cache, plan_cache_size

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general", "backends", "plan_cache_size",
           "clear_plan_cache", "__version__", "jax", "torch"]


def __getattr__(name):
    if name in ("jax", "torch"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'ragdot' has no attribute {name!r}")
