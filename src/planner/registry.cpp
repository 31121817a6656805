#include "planner/builtin_backends.hpp"

namespace ragdot::planner {

const std::vector<const Backend*>& registry() {
  // Fastest first, the oracle last. Built once; never mutated.
  static const std::vector<const Backend*> backends = [] {
    std::vector<const Backend*> v;
#if RAGDOT_HAVE_CUDA
    v.push_back(&cuda_backend());
    v.push_back(&cublas_backend());  // the vendor library: after the codegen backend (it syncs with the host)
#endif
    v.push_back(&cpu_backend());
    v.push_back(&padded_cpu_backend());
#if RAGDOT_HAVE_CUDA
    // also named "padded": taken when the plan asks for device memory (PlanOptions::memory_space)
    v.push_back(&padded_gpu_backend());
#endif
    v.push_back(&cpu_ref_backend());
    return v;
  }();
  return backends;
}

}  // namespace ragdot::planner
