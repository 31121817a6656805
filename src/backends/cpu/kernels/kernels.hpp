// The instruction-set kernels of the cpu backend, behind one table of function pointers.
//
// The driver (gemm_driver.cpp) runs every group's GEMM as blocks: it packs a panel of B
// (k x nb, zero padded), then for each strip of `mr` rows of A computes C[mr x nb] into a float
// scratch block and stores the valid part to the output. Each instruction set brings its own
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

struct IsaKernels {
  const char* name;
  int mr;            // rows of one strip (C block height)
  int nr;            // panel widths are multiples of this
  int k_align;       // packed K is rounded up to a multiple of this
  int b_elem_bytes;  // bytes per packed B element
  int a_elem_bytes;  // bytes per packed A element

  // Per-thread setup/teardown around kernel use (AMX tile configuration); may be no-ops.
  void (*thread_begin)();
  void (*thread_end)();

  // B[k x n] (n <= nb) -> a panel nb wide, zero padded in k and n.
  void (*pack_b)(MatrixView b, std::int64_t k, std::int64_t n, std::int64_t nb, void* panel);
  // Whether `compute` can read A in place (full strips only).
  bool (*a_direct)(MatrixView a, std::int64_t k);
  // A[rows x k] (rows <= mr) -> a strip of mr rows, zero padded; returns its row stride.
  std::int64_t (*pack_a)(MatrixView a, std::int64_t rows, std::int64_t k, void* strip);
  // C[mr x nb] = A[mr x k] * panel, overwriting c (row stride nb). A is either a packed strip
  // (col stride 1, row stride from pack_a) or, when a_direct, the caller's matrix.
  void (*compute)(const void* a, std::int64_t a_row_stride, std::int64_t a_col_stride, const void* panel,
                  std::int64_t k, std::int64_t nb, float* c);
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
