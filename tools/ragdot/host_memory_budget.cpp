#include "host_memory_budget.hpp"

#include "gemm_metrics.hpp"
#include "machine_info.hpp"

namespace ragdot::cli {

namespace {
// The rest of the process (the oracle, the output copy, the allocator's slack) needs some too.
constexpr double kUsableFraction = 0.9;
}  // namespace

Status ensure_host_memory(double bytes, const std::string& what) {
  const double available = available_host_memory_bytes();
  if (available <= 0 || bytes <= kUsableFraction * available) return Status::ok();
  return resource_exhausted(what + " needs " + format_bytes(bytes) + " of host memory, but only " +
                            format_bytes(available) + " are available; pass fewer --tokens or a --shrink factor");
}

}  // namespace ragdot::cli
