// Workspace for host plans: one buffer per thread that only grows. XLA's CPU runtime offers FFI
// handlers no scratch allocator and may run them on several threads at once; steady state
// allocates nothing.
#pragma once

#include <cstddef>

#include "ragdot/tensor.hpp"

namespace ragdot::python {

MutableBuffer host_workspace(std::size_t bytes);

}  // namespace ragdot::python
