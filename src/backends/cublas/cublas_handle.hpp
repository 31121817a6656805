// A cuBLAS handle made in a device's primary context, one per plan (a handle's stream is set per
// execute, so plans never share one), destroyed with the plan.
#pragma once

#include <memory>

#include "backends/cublas/cublas_library.hpp"
#include "backends/cuda/device.hpp"

namespace ragdot::cublas {

// ok when there is a GPU and cuBLAS loads, else unavailable("why").
Status cublas_available();

class Handle {
 public:
  static Result<std::unique_ptr<Handle>> create(const cuda::Device& device);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cublasHandle_t get() const { return handle_; }
  // Points the handle at the caller's stream (CUstream and cudaStream_t are the same type).
  Status set_stream(CUstream stream) const;

 private:
  explicit Handle(CUcontext context) : context_(context) {}
  CUcontext context_;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace ragdot::cublas
