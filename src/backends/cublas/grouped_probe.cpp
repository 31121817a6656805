#include "backends/cublas/grouped_probe.hpp"

#include <map>
#include <mutex>
#include <tuple>

namespace ragdot::cublas {

namespace {

// Device memory and a stream for the probe, released on every path out.
struct ProbeResources {
  CUdeviceptr memory = 0;
  CUstream stream = nullptr;
  ~ProbeResources() {
    const cuda::DriverApi* d = cuda::driver();
    if (stream) {
      d->cuStreamSynchronize(stream);
      d->cuStreamDestroy(stream);
    }
    if (memory) d->cuMemFree(memory);
  }
};

Result<bool> run_probe(const Handle& handle, cudaDataType_t in, cudaDataType_t out) {
  const CublasApi* b = library();
  if (!b->cublasGemmGroupedBatchedEx) return false;
  const cuda::DriverApi* d = cuda::driver();
  constexpr int kDim = 16;
  constexpr std::size_t kMatrixBytes = kDim * kDim * 4;
  ProbeResources r;
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemAlloc(&r.memory, 3 * kMatrixBytes + 3 * sizeof(void*)), "cuMemAlloc (probe)");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamCreate(&r.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate (probe)");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemsetD8Async(r.memory, 0, 3 * kMatrixBytes, r.stream), "cuMemsetD8Async (probe)");
  const CUdeviceptr arrays = r.memory + 3 * kMatrixBytes;
  void* pointers[3] = {reinterpret_cast<void*>(r.memory), reinterpret_cast<void*>(r.memory + kMatrixBytes),
                       reinterpret_cast<void*>(r.memory + 2 * kMatrixBytes)};
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemcpyHtoDAsync(arrays, pointers, sizeof pointers, r.stream), "cuMemcpyHtoDAsync");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamSynchronize(r.stream), "cuStreamSynchronize (probe)");
  RAGDOT_RETURN_IF_ERROR(handle.set_stream(r.stream));
  const cublasOperation_t op = CUBLAS_OP_N;
  const int dim = kDim, one_problem = 1;
  const float alpha = 1.0f, beta = 0.0f;
  auto* const* a = reinterpret_cast<const void* const*>(arrays);
  auto* const* c = reinterpret_cast<void* const*>(arrays + 2 * sizeof(void*));
  const cublasStatus_t s = b->cublasGemmGroupedBatchedEx(
      handle.get(), &op, &op, &dim, &dim, &dim, &alpha, a, in, &dim, a + 1, in, &dim, &beta, c, out, &dim, 1,
      &one_problem, CUBLAS_COMPUTE_32F);
  RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamSynchronize(r.stream), "cuStreamSynchronize (probe)");
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE) return false;
  RAGDOT_CUBLAS_RETURN_IF_ERROR(s, "cublasGemmGroupedBatchedEx (probe)");
  return true;
}

}  // namespace

Result<bool> grouped_takes(const cuda::Device& device, const Handle& handle, cudaDataType_t in, cudaDataType_t out) {
  static std::mutex mu;
  static auto* answers = new std::map<std::tuple<int, int, int>, bool>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device.ordinal, int(in), int(out));
  if (auto it = answers->find(key); it != answers->end()) return it->second;
  cuda::ScopedContext scope(device.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  RAGDOT_ASSIGN_OR_RETURN(bool takes, run_probe(handle, in, out));
  answers->emplace(key, takes);
  return takes;
}

}  // namespace ragdot::cublas
