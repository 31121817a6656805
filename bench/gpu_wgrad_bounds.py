#!/usr/bin/env python3
"""What bounds a weight gradient with small groups, measured on the vendor's kernels: the same
output bytes and FLOPs as a ragged-contraction (mode 2) case, timed in PyTorch on the GPU it runs on.

deepseek-v3's weight gradient (256 experts, ~128 rows each, K 7168, N 4096) writes a 15 GB bf16
output for 1.9 TFLOP: 128 FLOP per output byte, so whether it is bound by the tensor cores, by
DRAM writes or by something on the chip between them decides what target it can reach. Timed:

- bmm: torch.bmm of [E, K, R] by [E, R, N] into a preallocated [E, K, N] (cuBLAS's batched GEMM;
  every group exactly R rows, no raggedness at all): the vendor's kernel on the same FLOPs and
  output bytes.
- grouped_mm: torch._grouped_mm of x^T by dy with offsets, the ragged form (PyTorch's CUTLASS).
- fill: writing the output's bytes and nothing else (the DRAM write roof).
- zero: the same by zero_() (cudaMemsetAsync where the tensor is contiguous): whether another
  write path than fill_'s stores reaches a higher roof.
- tiles_rows256 / tiles_cols256 / tiles_cols64: the same bytes written in output tiles of 128 rows
  by 256 (64) columns with 16-byte stores and nothing else (a Triton kernel, one tile per program),
  the programs in two orders: adjacent column tiles of the same rows first (whole rows written
  together), or one column tile down consecutive rows first (every SM then writes 512- or 128-byte
  pieces of rows 8 KiB apart). Whether DRAM takes a tile epilogue's pieces at the fill's rate.
- dense: torch.mm of [K, E*R] by [E*R, N], the same FLOPs into a small output (the compute roof).

    gpu_wgrad_bounds.py [--experts 256] [--rows 128] [--k 7168] [--n 4096] [--reps 20] [--only NAME]
                        [--out bounds.json]
"""
import argparse
import json
import sys

from gpu_peers import cuda_median_ms  # (this file's folder is on the path when run as a script)


def make_tile_writer():
    """A Triton kernel that writes one 128 x BN tile of a bf16 [rows, n] tensor per program and
    nothing else; None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def write_tile(out_ptr, rows, n, BM: tl.constexpr, BN: tl.constexpr, ROWS_FIRST: tl.constexpr):
        pid = tl.program_id(0)
        n_tiles = n // BN
        m_tiles = rows // BM
        if ROWS_FIRST:
            mt = pid // n_tiles
            nt = pid % n_tiles
        else:
            nt = pid // m_tiles
            mt = pid % m_tiles
        offs_m = (mt * BM + tl.arange(0, BM)).to(tl.int64)
        offs_n = nt * BN + tl.arange(0, BN)
        value = tl.full((BM, BN), 0.5, tl.bfloat16)
        tl.store(out_ptr + offs_m[:, None] * n + offs_n[None, :], value)

    return write_tile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--rows", type=int, default=128, help="rows of every group")
    ap.add_argument("--k", type=int, default=7168)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", default="", help="time only the kernel of this name (for a profiler)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    import torch

    dev = torch.device("cuda")
    E, R, K, N = a.experts, a.rows, a.k, a.n
    flops = 2.0 * E * R * K * N
    out_bytes = 2.0 * E * K * N

    def timed(fn):
        return cuda_median_ms(fn, a.reps)

    # inputs in [-1, 1), never all zeros; the activations as x [E*R, K], dy [E*R, N]
    x = torch.rand(E * R, K, device=dev, dtype=torch.bfloat16) * 2 - 1
    dy = torch.rand(E * R, N, device=dev, dtype=torch.bfloat16) * 2 - 1
    out = torch.empty(E, K, N, device=dev, dtype=torch.bfloat16)
    offs = torch.arange(1, E + 1, device=dev, dtype=torch.int32) * R
    xt_batched = x.view(E, R, K).transpose(1, 2)  # [E, K, R], a view
    dy_batched = dy.view(E, R, N)

    tile_writer = make_tile_writer()

    def write_tiles(width, rows_first):
        rows = E * K
        if tile_writer is None or rows % 128 or N % width:
            raise RuntimeError("needs Triton, and whole tiles")
        grid = (rows // 128 * (N // width),)
        tile_writer[grid](out, rows, N, BM=128, BN=width, ROWS_FIRST=rows_first, num_warps=8)

    kernels = {
        "bmm": lambda: torch.bmm(xt_batched, dy_batched, out=out),
        "grouped_mm": lambda: torch._grouped_mm(x.t(), dy, offs=offs),
        "fill": lambda: out.fill_(0.5),
        "zero": lambda: out.zero_(),
        "tiles_rows256": lambda: write_tiles(256, True),
        "tiles_cols256": lambda: write_tiles(256, False),
        "tiles_cols64": lambda: write_tiles(64, False),
        "dense": lambda: torch.mm(x.t(), dy),
    }
    res = {"experts": E, "rows": R, "k": K, "n": N, "gpu": torch.cuda.get_device_name(), "ms": {}}
    for name, fn in kernels.items():
        if a.only and name != a.only:
            continue
        try:
            ms = timed(fn)
        except Exception as e:  # a kernel this PyTorch lacks is reported, not fatal
            res.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        res["ms"][name] = ms
        line = f"{name:11s} {ms:8.3f} ms"
        if name not in ("fill", "zero") and not name.startswith("tiles"):
            line += f"  {flops / ms / 1e9:7.1f} TFLOP/s"
        if name != "dense":
            line += f"  output written at {out_bytes / ms / 1e9:6.2f} TB/s"
        print(line, flush=True)
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
