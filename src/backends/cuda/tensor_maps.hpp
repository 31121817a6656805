// TMA tensor maps for the Hopper family: one 2-D map over the whole lhs (rows x k) and one 3-D
// map over the whole rhs (its group index is the third coordinate), so that no map depends on the
// group sizes. Maps hold the buffers' addresses, so they are encoded at execute time, on the host
// (a few microseconds, no device work, nothing allocated).
#pragma once

#include <cuda.h>

#include "backends/cuda/kernel_variant.hpp"
#include "core/problem.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cuda {

struct OperandMaps {
  CUtensorMap a;
  CUtensorMap b;
  CUtensorMap out;  // the TMA-store epilogue's (variant.tma_store), else unused
  bool b_one_box = false;  // b is the 4-D map of b_one_box_applies (the kernel's p.b_one_box)
};

// Mode 1 with A through TMA on one CTA per tile (not gathered, swapped or in CTA clusters):
// A's map has boxes of 128 rows, a stage's A tile one TMA load. A property of the variant alone,
// as the kernel's kAOneBoxForm is; B's form depends on n too, so the launch passes it
// (p.b_one_box).
bool a_one_box_applies(const KernelVariant& v);

// Mode 1 with [G, K, N] weights (contiguous along n, n a multiple of 64), on one CTA or in pairs
// along n, without the SwiGLU column order: B's map is 4-D and a stage's B tile one TMA load.
// Both only for a variant with one_box_loads (RAGDOT_CUDA_VARIANT=boxes=one).
bool b_one_box_applies(const KernelVariant& v, const core::GroupGemmProblem& p);

// Box shapes follow the kernel. Mode 1: A boxes of 64 k x bm rows; B boxes of 64 k x bn n
// (K-major weights) or 64 n x 64 k (N-major weights). Mode 2 (both operands [k, m|n]): boxes of
// 64 m|n x 64 k; with the TMA-store epilogue, output boxes of 64 n x 64 m of one group's block.
// All with the 128-byte swizzle.
Status encode_operand_maps(const KernelVariant& v, const core::GroupGemmProblem& p, const void* lhs, const void* rhs,
                           void* out, OperandMaps& maps);

}  // namespace ragdot::cuda
