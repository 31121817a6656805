// Checked mode: one block validates the group sizes (and group offset) on the device before the
// GEMM is launched, and ORs into *flag: 1 = a negative size, 2 = a row sums past the ragged
// extent, 4 = group offset out of range. The host reads the flag back and refuses to run.
#pragma once

#include "ragdot/common.cuh"

extern "C" __global__ void ragdot_check_group_sizes(const RagdotKernelParams p, int* flag) {
  using namespace ragdot;
  const i64 rows = p.num_groups > 0 ? (i64)p.gs_rows_for_check : 0;
  int bad = 0;
  for (i64 row = threadIdx.x; row < rows; row += blockDim.x) {
    i64 sum = 0;
    for (int i = 0; i < p.num_groups; ++i) {
      const i64 idx = row * p.num_groups + i;
      const i64 v = p.gs_is_int64 ? ((const i64*)p.group_sizes)[idx] : (i64)((const int*)p.group_sizes)[idx];
      if (v < 0) bad |= 1;
      if (v > p.ragged_extent) bad |= 2;
      else if (v > 0) sum += v;  // each term at most the extent: the sum cannot overflow
    }
    if (sum > p.ragged_extent) bad |= 2;
  }
  if (threadIdx.x == 0 && p.group_offset != 0) {
    const int off = *p.group_offset;
    if (off < 0 || off > p.num_groups - p.computed_groups) bad |= 4;
  }
  if (bad) atomicOr(flag, bad);
}
