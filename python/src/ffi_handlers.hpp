// The XLA FFI handlers ragdot registers with JAX (ragdot/jax/_targets.py), one per platform.
#pragma once

#include "xla/ffi/api/ffi.h"

namespace ragdot::python {

XLA_FFI_DECLARE_HANDLER_SYMBOL(ragdot_ragged_dot_cpu);
#if RAGDOT_PYTHON_HAVE_CUDA
XLA_FFI_DECLARE_HANDLER_SYMBOL(ragdot_ragged_dot_cuda);
#endif

}  // namespace ragdot::python
