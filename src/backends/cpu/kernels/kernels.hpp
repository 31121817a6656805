// The instruction-set kernels of the cpu backend, behind one table of function pointers.
//
// The driver (gemm_driver.cpp) runs every group's GEMM as blocks: a panel of B (k x nb, zero
// padded) is packed, then for each strip of `mr` rows of A C[mr x nb] is computed into a float
// scratch block and the valid part stored to the output. Each instruction set brings its own
// packed formats, micro-kernel and store. The files that implement them are compiled with their
// instruction set enabled and must only be called after run-time detection (cpu_features.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ragdot/dtype.hpp"

namespace ragdot::cpu::kernels {

// A strided matrix view in elements: element (r, c) at data + (r * row_stride + c * col_stride).
struct MatrixView {
  const void* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 0;
  DType dtype = DType::kF32;
};

struct OutView {
  void* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 0;
  DType dtype = DType::kF32;
};

// The packing of one B panel, advanced a slice at a time. The driver hands the next unit's panel
// to the current unit's compute calls, which pack it between their own matrix instructions: the
// weights' trip from memory then overlaps the arithmetic instead of following it.
struct PanelJob {
  MatrixView b;                 // source, at the panel's first column
  std::int64_t k = 0, n = 0, nb = 0;
  void* panel = nullptr;
  std::int64_t next = 0;        // first k row not packed yet (a multiple of k_step)
  std::int64_t limit = 0;       // how far this compute call should get
  std::int64_t end = 0;         // all rows, zero padding included (round_up(k, k_align))
};

// The layout of a packed A strip, in elements.
struct StripStrides {
  std::int64_t row = 0, col = 1;
};

struct IsaKernels {
  const char* name;
  int mr;            // rows of one strip (C block height)
  int nr;            // panel widths are multiples of this
  int k_align;       // packed K is rounded up to a multiple of this
  int k_step;        // packing proceeds in runs of this many k rows
  int b_elem_bytes;  // bytes per packed B element
  int a_elem_bytes;  // bytes per packed A element
  int panel_budget;  // bytes of packed B per panel the driver aims for (sets the panel width)
  int kc_max;        // longest k block per panel (a multiple of k_align); longer k is split

  // Per-thread setup/teardown around kernel use (AMX tile configuration); may be no-ops.
  void (*thread_begin)();
  void (*thread_end)();

  // Packs rows [job.next, job.limit) of B[k x n] (n <= nb) into the panel (nb wide, zero padded
  // in k and n) and advances job.next.
  void (*pack_b)(PanelJob& job);
  // Whether `compute` can read A in place (full strips only).
  bool (*a_direct)(MatrixView a, std::int64_t k);
  // A[rows x k] (rows <= mr) -> a strip of mr rows, zero padded, each row padded by at most 32
  // elements (the strip has room for mr x (kc + 32)); returns where element (r, kk)
  // lies in it: strip[r * row + kk * col].
  StripStrides (*pack_a)(MatrixView a, std::int64_t rows, std::int64_t k, void* strip);
  // C[mr x nb] (+)= A[mr x k] * panel: overwrites c, or adds to it when `accumulate` (k split into
  // blocks); c has row stride nb. A is either a packed strip (strides from
  // pack_a) or, when a_direct, the caller's matrix. Meanwhile it advances `job` (may be null) up
  // to job->limit.
  void (*compute)(const void* a, std::int64_t a_row_stride, std::int64_t a_col_stride, const void* panel,
                  std::int64_t k, std::int64_t nb, float* c, bool accumulate, PanelJob* job);
  // out[rows x cols] = c (row stride ldc), converted to out.dtype.
  void (*store)(const float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, OutView out);
  // out[rows x cols] = 0.
  void (*zero)(std::int64_t rows, std::int64_t cols, OutView out);
};

std::int64_t round_up(std::int64_t x, std::int64_t m);

const IsaKernels& scalar_kernels();       // any x86-64 or other CPU; f32 compute
const IsaKernels& avx512_f32_kernels();   // AVX-512F: f32 FMA, inputs converted while packing
const IsaKernels& avx512_bf16_kernels();  // AVX512_BF16: vdpbf16ps on bf16 pairs
const IsaKernels& amx_bf16_kernels();     // AMX-BF16 tiles

}  // namespace ragdot::cpu::kernels
