// GPU memory through the CUDA driver, on the first GPU's primary context, with a stream of its own.
#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "verify/device_memory.hpp"

namespace ragdot::verify {

namespace {

class DeviceMemory final : public MemoryOps {
 public:
  explicit DeviceMemory(const cuda::Device& dev) : dev_(dev) {
    cuda::ScopedContext scope(dev_.context);
    cuda::driver()->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING);
  }
  MemorySpace space() const override { return MemorySpace::kDevice; }
  Result<void*> alloc(std::size_t bytes) override {
    cuda::ScopedContext scope(dev_.context);
    CUdeviceptr p = 0;
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc");
    return reinterpret_cast<void*>(p);
  }
  void free(void* p) override {
    if (!p) return;
    cuda::ScopedContext scope(dev_.context);
    cuda::driver()->cuMemFree(reinterpret_cast<CUdeviceptr>(p));
  }
  Status upload(void* dst, const void* src, std::size_t bytes) override {
    cuda::ScopedContext scope(dev_.context);
    // A synchronous cuMemcpyHtoD from pageable memory may return before its DMA has landed, and
    // it is ordered only with the legacy stream, not with ours (non-blocking): a kernel launched
    // right after could read stale inputs or have its output overwritten by a late poison fill.
    // Copying on our stream and waiting for it makes the upload complete when this returns.
    RAGDOT_CU_RETURN_IF_ERROR(
        cuda::driver()->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, stream_),
        "cuMemcpyHtoDAsync");
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuStreamSynchronize(stream_), "cuStreamSynchronize");
    return Status::ok();
  }
  Status download(void* dst, const void* src, std::size_t bytes) override {
    cuda::ScopedContext scope(dev_.context);
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuStreamSynchronize(stream_), "cuStreamSynchronize");
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
                              "cuMemcpyDtoH");
    return Status::ok();
  }
  void* stream() override { return stream_; }
  Status synchronize() override {
    cuda::ScopedContext scope(dev_.context);
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuStreamSynchronize(stream_), "cuStreamSynchronize");
    return Status::ok();
  }

 private:
  const cuda::Device& dev_;
  CUstream stream_ = nullptr;
};

}  // namespace

MemoryOps* device_memory(std::string* why) {
  static MemoryOps* mem = [&]() -> MemoryOps* {
    auto dev = cuda::device(0);
    if (!dev.ok()) {
      if (why) *why = dev.status().message();
      return nullptr;
    }
    return new DeviceMemory(**dev);  // lives as long as the process
  }();
  if (!mem && why && why->empty()) {
    auto dev = cuda::device(0);
    if (!dev.ok()) *why = dev.status().message();
  }
  return mem;
}

}  // namespace ragdot::verify
