"""The array kinds the eager API takes, each with how to hand a buffer to the native module and
how to allocate the output next to the inputs: NumPy (host), PyTorch and CuPy (host or CUDA,
through DLPack). Anything else is converted with numpy.asarray."""
from __future__ import annotations

import numpy as np


class _NumPy:
    @staticmethod
    def adopt(x):
        return np.ascontiguousarray(x)

    @staticmethod
    def buffer(x):
        # 2-byte floats travel as raw uint16: the buffer protocol has no format for bfloat16.
        return x.view(np.uint16) if x.dtype.itemsize == 2 and x.dtype.kind != "i" else x

    @staticmethod
    def empty(shape, dtype_name, like):
        import ml_dtypes

        return np.empty(shape, {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype_name])

    @staticmethod
    def int32(values, like):
        return np.asarray(values, dtype=np.int32).reshape(1)

    @staticmethod
    def on_device(x):
        return False

    @classmethod
    def sum_as(cls, x, axes, dtype_name):
        """x summed over `axes`, in the dtype ragdot calls dtype_name."""
        out = cls.empty((), dtype_name, x)
        return x.sum(axis=tuple(axes)).astype(out.dtype)

    @staticmethod
    def workspace(nbytes, like):
        return np.empty(nbytes, np.uint8)  # not asked for: host plans keep their own workspace

    @staticmethod
    def stream(like):
        return 0


class _Torch(_NumPy):
    @staticmethod
    def adopt(x):
        return x.detach().contiguous()  # DLPack refuses tensors that require grad

    @staticmethod
    def buffer(x):
        return x

    @staticmethod
    def empty(shape, dtype_name, like):
        import torch

        dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
        return torch.empty(shape, dtype=dtype, device=like.device)

    @staticmethod
    def int32(values, like):
        import torch

        return torch.as_tensor(values, dtype=torch.int32, device=like.device).reshape(1)

    @staticmethod
    def on_device(x):
        return x.is_cuda

    @classmethod
    def sum_as(cls, x, axes, dtype_name):
        return x.sum(dim=tuple(axes)).to(cls.empty((), dtype_name, x).dtype)

    @staticmethod
    def workspace(nbytes, like):
        import torch

        return torch.empty(nbytes, dtype=torch.uint8, device=like.device)

    @staticmethod
    def stream(like):
        import torch

        return torch.cuda.current_stream(like.device).cuda_stream if like.is_cuda else 0


class _CuPy(_Torch):
    sum_as = _NumPy.sum_as  # the NumPy spelling (axis=, astype)

    @staticmethod
    def on_device(x):
        return True  # CuPy arrays always live on a GPU

    @staticmethod
    def adopt(x):
        import cupy

        return cupy.ascontiguousarray(x)

    @staticmethod
    def empty(shape, dtype_name, like):
        import cupy

        if dtype_name == "bf16":
            raise TypeError("CuPy has no bfloat16 arrays; use PyTorch or ragdot.jax for bfloat16 on the GPU")
        with like.device:
            return cupy.empty(shape, {"f32": cupy.float32, "f16": cupy.float16}[dtype_name])

    @staticmethod
    def int32(values, like):
        import cupy

        with like.device:
            return cupy.asarray(values, dtype=cupy.int32).reshape(1)

    @staticmethod
    def workspace(nbytes, like):
        import cupy

        with like.device:
            return cupy.empty(nbytes, cupy.uint8)

    @staticmethod
    def stream(like):
        import cupy

        return cupy.cuda.get_current_stream().ptr


def framework_of(x):
    kind = type(x).__module__.split(".")[0]
    return {"torch": _Torch, "cupy": _CuPy}.get(kind, _NumPy)
