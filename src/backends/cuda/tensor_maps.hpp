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
};

// Box shapes follow the kernel. Mode 1: A boxes of 64 k x bm rows; B boxes of 64 k x bn n
// (K-major weights) or 64 n x 64 k (N-major weights). Mode 2 (both operands [k, m|n]): boxes of
// 64 m|n x 64 k; with the TMA-store epilogue, output boxes of 64 n x 64 m of one group's block.
// All with the 128-byte swizzle.
Status encode_operand_maps(const KernelVariant& v, const core::GroupGemmProblem& p, const void* lhs, const void* rhs,
                           void* out, OperandMaps& maps);

}  // namespace ragdot::cuda
