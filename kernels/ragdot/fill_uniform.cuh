// Counter-based uniform values written straight into device memory: element i of a fill with
// seed s is scale * (2 u - 1), u = (hash(s, i) >> 8) / 2^24, with hash = murmur3's 32-bit
// finalizer chained over the seed and the two halves of i; rounded to the buffer's type. Layers
// at full size (tens of GB of expert weights) get their parameters in milliseconds instead of a
// host generation and upload, and any program can reproduce the same values from (seed, i) (the
// Python peers do, with NumPy). The hash and the value are in fill_params.h, which the host's
// uniform_fill_value includes too.
//
//   ragdot_fill_uniform   grid-stride over the elements, block 256
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/fill_params.h"

extern "C" __global__ void __launch_bounds__(256) ragdot_fill_uniform(const RagdotFillParams p) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += stride) {
    const float v = ragdot_fill_value(p.seed, (unsigned long long)i, p.scale);
    if (p.elem_bytes == 2) {
      ((ragdot::u16*)p.data)[i] = p.is_f16 ? ragdot::from_float(v, ragdot::F16()) : ragdot::from_float(v, ragdot::BF16());
    } else {
      ((float*)p.data)[i] = v;
    }
  }
}
