#include "verify/check.hpp"

#include "verify/device_memory.hpp"

namespace ragdot::verify {

MemoryOps* memory_for(MemorySpace space, std::string* why) {
  if (space == MemorySpace::kHost) return &host_memory();
  return device_memory(why);
}

}  // namespace ragdot::verify
