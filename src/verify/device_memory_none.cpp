// Built when the library has no GPU backends.
#include "verify/device_memory.hpp"

namespace ragdot::verify {

MemoryOps* device_memory(std::string* why) {
  if (why) *why = "ragdot was built without the GPU backends";
  return nullptr;
}

}  // namespace ragdot::verify
