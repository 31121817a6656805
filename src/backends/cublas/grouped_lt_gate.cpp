#include "backends/cublas/grouped_lt_gate.hpp"

#include <string>

#include "backends/cublas/cublas_library.hpp"

namespace ragdot::cublas {

Status grouped_lt_device_shapes(const GroupedLtQuery& q) {
  if (q.header_version < kGroupedLtHeaderVersion) {
    return unavailable("needs cuBLAS headers >= " + version_string(kGroupedLtHeaderVersion) + ", built with " +
                       version_string(q.header_version));
  }
  if (q.cc_major != 9) {
    return unavailable("Hopper only, the device is sm_" + std::to_string(q.cc_major) + std::to_string(q.cc_minor));
  }
  if (q.runtime_version < kGroupedLtHopperRuntimeVersion) {
    return unavailable("needs cuBLAS >= " + version_string(kGroupedLtHopperRuntimeVersion) + " on Hopper, loaded " +
                       version_string(q.runtime_version));
  }
  if (!q.path_built) return unavailable("not built into this library");
  return Status::ok();
}

bool grouped_lt_path_built() {
  // Written against the declarations of the 13.2+ headers once they can be built and run here;
  // until then every plan takes the host-shape path and says why.
  return false;
}

}  // namespace ragdot::cublas
