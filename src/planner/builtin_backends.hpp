// Accessors of the backends compiled into the library (each defined next to its backend).
#pragma once

#include "planner/backend.hpp"

namespace ragdot::planner {

const Backend& cpu_ref_backend();
const Backend& cpu_backend();
const Backend& padded_cpu_backend();
#if RAGDOT_HAVE_CUDA
const Backend& cuda_backend();
const Backend& cublas_backend();
const Backend& padded_gpu_backend();
#endif

}  // namespace ragdot::planner
