#include "backends/cublas/cublas_handle.hpp"

namespace ragdot::cublas {

Status cublas_available() {
  std::string why;
  if (cuda::device_count(&why) == 0) return unavailable(why);
  if (!library(&why)) return unavailable(why);
  return Status::ok();
}

Result<std::unique_ptr<Handle>> Handle::create(const cuda::Device& device) {
  std::string why;
  const CublasApi* b = library(&why);
  if (!b) return unavailable(why);
  std::unique_ptr<Handle> h(new Handle(device.context));
  cuda::ScopedContext scope(device.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  RAGDOT_CUBLAS_RETURN_IF_ERROR(b->cublasCreate(&h->handle_), "cublasCreate");
  return h;
}

Handle::~Handle() {
  if (!handle_) return;
  cuda::ScopedContext scope(context_);
  library()->cublasDestroy(handle_);
}

Status Handle::set_stream(CUstream stream) const {
  RAGDOT_CUBLAS_RETURN_IF_ERROR(library()->cublasSetStream(handle_, stream), "cublasSetStream");
  return Status::ok();
}

}  // namespace ragdot::cublas
