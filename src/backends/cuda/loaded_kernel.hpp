// A generated kernel compiled (or found in the JIT cache) and loaded into a device's primary
// context. Loaded once per (device, cache key) and shared by every plan that uses it.
#pragma once

#include <memory>

#include "backends/cuda/device.hpp"
#include "backends/cuda/kernel_cache.hpp"
#include "backends/cuda/kernel_variant.hpp"

namespace ragdot::cuda {

struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction gemm = nullptr;
  CUfunction check = nullptr;
  std::shared_ptr<const CompiledKernel> compiled;
  double module_load_ms = 0.0;
};

Result<std::shared_ptr<const LoadedKernel>> load_kernel(const Device& device, const KernelVariant& variant);

// Any kernel source (including the embedded headers), compiled or found in the JIT cache and
// loaded into the device's primary context; modules stay loaded for the life of the process.
struct LoadedModule {
  CUmodule module = nullptr;
  std::shared_ptr<const CompiledKernel> compiled;
  double module_load_ms = 0.0;
};
Result<std::shared_ptr<const LoadedModule>> load_module(const Device& device, const std::string& source,
                                                        const std::string& source_name);

// Raises the kernel's dynamic shared-memory limit to at least `bytes` (never lowers it).
Status reserve_dynamic_smem(const Device& device, const LoadedKernel& k, std::int64_t bytes);

}  // namespace ragdot::cuda
