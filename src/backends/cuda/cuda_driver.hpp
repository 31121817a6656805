// The CUDA driver API, loaded at run time with dlopen so that the library loads and its CPU
// backends run on machines with no GPU or no driver. Only this and the other files of this
// directory see CUDA types; public headers never do.
#pragma once

#include <cuda.h>

#include <string>

#include "ragdot/status.hpp"

namespace ragdot::cuda {

struct DriverApi {
#define RAGDOT_CU_FN(name) decltype(&::name) name = nullptr;
#include "backends/cuda/cuda_driver_functions.inc"
#undef RAGDOT_CU_FN
};

// The driver, loaded and initialized once; null (with `why`) when there is none.
const DriverApi* driver(std::string* why = nullptr);

// An error status naming the call and the driver's message, or ok.
Status cu_status(CUresult r, const char* what);

#define RAGDOT_CU_RETURN_IF_ERROR(call, what)                         \
  do {                                                                \
    const CUresult ragdot_cu_r_ = (call);                             \
    if (ragdot_cu_r_ != CUDA_SUCCESS) return ::ragdot::cuda::cu_status(ragdot_cu_r_, what); \
  } while (0)

// Makes the primary context of a device current on this thread for a scope, and restores the
// caller's context afterwards (frameworks keep their own current context).
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  Status status() const { return status_; }

 private:
  bool pushed_ = false;
  Status status_;
};

}  // namespace ragdot::cuda
