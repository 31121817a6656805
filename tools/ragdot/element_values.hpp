// Reads one element of a host buffer of a floating dtype as a double (for comparisons).
#pragma once

#include <cstdint>

#include "ragdot/dtype.hpp"

namespace ragdot::cli {

double element_as_double(const void* data, DType dtype, std::int64_t index);

}  // namespace ragdot::cli
