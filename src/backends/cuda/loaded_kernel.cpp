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

Result<std::shared_ptr<const LoadedModule>> load_module(const Device& device, const std::string& source,
                                                        const std::string& source_name) {
  const std::string arch = env::cuda_arch().value_or(arch_for(device.traits));
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledKernel> compiled,
                          KernelCache::instance().get(source, source_name, arch));
  // Modules stay loaded for the life of the process: plans anywhere may still use them.
  static auto* loaded = new std::map<std::pair<int, std::string>, std::shared_ptr<const LoadedModule>>();
  std::lock_guard<std::mutex> lock(mutex());
  const auto id = std::make_pair(device.ordinal, compiled->key);
  if (auto it = loaded->find(id); it != loaded->end()) return it->second;

  ScopedContext scope(device.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  auto m = std::make_shared<LoadedModule>();
  m->compiled = compiled;
  const auto t0 = std::chrono::steady_clock::now();
  RAGDOT_CU_RETURN_IF_ERROR(driver()->cuModuleLoadData(&m->module, compiled->cubin.data()), "cuModuleLoadData");
  m->module_load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  loaded->emplace(id, m);
  return std::shared_ptr<const LoadedModule>(m);
}

Result<std::shared_ptr<const LoadedKernel>> load_kernel(const Device& device, const KernelVariant& variant) {
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const LoadedModule> m,
                          load_module(device, generate_source(variant), "ragdot_kernel.cu"));
  static auto* kernels = new std::map<const LoadedModule*, std::shared_ptr<const LoadedKernel>>();
  std::lock_guard<std::mutex> lock(mutex());
  if (auto it = kernels->find(m.get()); it != kernels->end()) return it->second;
  const DriverApi* d = driver();
  auto k = std::make_shared<LoadedKernel>();
  k->module = m->module;
  k->compiled = m->compiled;
  k->module_load_ms = m->module_load_ms;
  RAGDOT_CU_RETURN_IF_ERROR(d->cuModuleGetFunction(&k->gemm, k->module, kKernelEntry), "cuModuleGetFunction");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuModuleGetFunction(&k->check, k->module, kCheckEntry), "cuModuleGetFunction");
  kernels->emplace(m.get(), k);
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
