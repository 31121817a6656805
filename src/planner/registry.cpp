#include "planner/builtin_backends.hpp"

namespace ragdot::planner {

const std::vector<const Backend*>& registry() {
  // Fastest first, the oracle last. Built once; never mutated.
  static const std::vector<const Backend*> backends = [] {
    std::vector<const Backend*> v;
#if RAGDOT_HAVE_CUDA
    v.push_back(&cuda_backend());
#endif
    v.push_back(&cpu_backend());
    v.push_back(&padded_cpu_backend());
    v.push_back(&cpu_ref_backend());
    return v;
  }();
  return backends;
}

}  // namespace ragdot::planner
