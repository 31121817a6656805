#include "backends/cuda/loaded_kernel.hpp"

#include <chrono>
#include <map>
#include <mutex>

#include "core/env.hpp"

namespace ragdot::cuda {

namespace {
std::mutex& mutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

Result<std::shared_ptr<const LoadedKernel>> load_kernel(const Device& device, const KernelVariant& variant) {
  const std::string arch = env::cuda_arch().value_or(arch_for(device.traits));
  const std::string source = generate_source(variant);
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledKernel> compiled,
                          KernelCache::instance().get(source, "ragdot_kernel.cu", arch));
  // Modules stay loaded for the life of the process: plans anywhere may still use them.
  static auto* loaded = new std::map<std::pair<int, std::string>, std::shared_ptr<const LoadedKernel>>();
  std::lock_guard<std::mutex> lock(mutex());
  const auto id = std::make_pair(device.ordinal, compiled->key);
  if (auto it = loaded->find(id); it != loaded->end()) return it->second;

  const DriverApi* d = driver();
  ScopedContext scope(device.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  auto k = std::make_shared<LoadedKernel>();
  k->compiled = compiled;
  const auto t0 = std::chrono::steady_clock::now();
  RAGDOT_CU_RETURN_IF_ERROR(d->cuModuleLoadData(&k->module, compiled->cubin.data()), "cuModuleLoadData");
  k->module_load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  RAGDOT_CU_RETURN_IF_ERROR(d->cuModuleGetFunction(&k->gemm, k->module, kKernelEntry), "cuModuleGetFunction");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuModuleGetFunction(&k->check, k->module, kCheckEntry), "cuModuleGetFunction");
  loaded->emplace(id, k);
  return std::shared_ptr<const LoadedKernel>(k);
}

Status reserve_dynamic_smem(const Device& device, const LoadedKernel& k, std::int64_t bytes) {
  const DriverApi* d = driver();
  std::lock_guard<std::mutex> lock(mutex());
  // function attributes need the module's context current, whatever the caller has current
  ScopedContext scope(device.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  int current = 0;
  d->cuFuncGetAttribute(&current, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.gemm);
  if (bytes <= current) return Status::ok();
  RAGDOT_CU_RETURN_IF_ERROR(
      d->cuFuncSetAttribute(k.gemm, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)),
      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  return Status::ok();
}

}  // namespace ragdot::cuda
