// The GPUs of this machine as the cuda backends see them: ordinal, primary context, traits.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/kernel_variant.hpp"

namespace ragdot::cuda {

struct Device {
  int ordinal = 0;
  CUdevice handle = 0;
  CUcontext context = nullptr;  // the primary context (the one CUDA runtime, PyTorch and JAX use)
  std::string name;
  DeviceTraits traits;
  int multiprocessors = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
  std::string describe() const;  // "NVIDIA H200 (sm_90a, 132 SMs, 139 GiB)"
};

// Number of GPUs, or 0 with `why` when there is no driver or no GPU.
int device_count(std::string* why = nullptr);

// The device, its primary context retained; made once per ordinal.
Result<const Device*> device(int ordinal);

}  // namespace ragdot::cuda
