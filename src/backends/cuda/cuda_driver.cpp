#include "backends/cuda/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "backends/cuda/shared_library.hpp"

namespace ragdot::cuda {

namespace {

#define RAGDOT_STRINGIFY_(x) #x
#define RAGDOT_STRINGIFY(x) RAGDOT_STRINGIFY_(x)

struct Loaded {
  DriverApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  std::string failure;
  void* lib = open_first_library({"libcuda.so.1"}, failure);
  if (!lib) {
    l.why = "no CUDA driver (" + failure + ")";
    return l;
  }
  // Entry points newer than the driver (cuTensorMapEncodeTiled on a pre-12 driver) stay null and
  // only the features that need them are refused.
#define RAGDOT_CU_FN(name) l.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, RAGDOT_STRINGIFY(name)));
#include "backends/cuda/cuda_driver_functions.inc"
#undef RAGDOT_CU_FN
  if (!l.api.cuInit || !l.api.cuLaunchKernel || !l.api.cuModuleLoadData || !l.api.cuMemAlloc ||
      !l.api.cuDevicePrimaryCtxRetain || !l.api.cuStreamBeginCapture) {
    l.why = "the CUDA driver is too old (missing entry points)";
    return l;
  }
  const CUresult r = l.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* msg = nullptr;
    if (l.api.cuGetErrorString) l.api.cuGetErrorString(r, &msg);
    l.why = std::string("cuInit failed: ") + (msg ? msg : "unknown error");
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const DriverApi* driver(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

Status cu_status(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::ok();
  const char* name = nullptr;
  const char* msg = nullptr;
  if (const DriverApi* d = driver()) {
    if (d->cuGetErrorName) d->cuGetErrorName(r, &name);
    if (d->cuGetErrorString) d->cuGetErrorString(r, &msg);
  }
  return internal_error(std::string(what) + ": " + (name ? name : "CUDA error") + " (" + (msg ? msg : "?") + ")");
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const DriverApi* d = driver();
  CUcontext current = nullptr;
  d->cuCtxGetCurrent(&current);
  if (current == ctx) return;
  status_ = cu_status(d->cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
  pushed_ = status_.is_ok();
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext popped = nullptr;
    driver()->cuCtxPopCurrent(&popped);
  }
}

}  // namespace ragdot::cuda
