#include "backends/cuda/device.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "core/env.hpp"

namespace ragdot::cuda {

int device_count(std::string* why) {
  const DriverApi* d = driver(why);
  if (!d) return 0;
  int n = 0;
  if (d->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    if (why) *why = "no CUDA GPU found";
    return 0;
  }
  return n;
}

std::string Device::describe() const {
  return name + " (" + arch_for(traits) + ", " + std::to_string(multiprocessors) + " SMs, " +
         std::to_string(memory_bytes >> 30) + " GiB)";
}

namespace {

Result<std::unique_ptr<Device>> open(int ordinal) {
  std::string why;
  const DriverApi* d = driver(&why);
  if (!d) return unavailable(why);
  const int n = device_count(&why);
  if (n == 0) return unavailable(why);
  if (ordinal < 0 || ordinal >= n)
    return invalid_argument("GPU ordinal " + std::to_string(ordinal) + " out of range (" + std::to_string(n) +
                            " GPUs)");
  auto dev = std::make_unique<Device>();
  dev->ordinal = ordinal;
  RAGDOT_CU_RETURN_IF_ERROR(d->cuDeviceGet(&dev->handle, ordinal), "cuDeviceGet");
  char name[256] = {};
  d->cuDeviceGetName(name, sizeof name, dev->handle);
  dev->name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    d->cuDeviceGetAttribute(&v, a, dev->handle);
    return v;
  };
  dev->traits.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  dev->traits.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  dev->traits.max_dynamic_smem = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  dev->multiprocessors = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  dev->traits.sm_count = dev->multiprocessors;
  dev->l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  size_t mem = 0;
  d->cuDeviceTotalMem(&mem, dev->handle);
  dev->memory_bytes = std::int64_t(mem);
  RAGDOT_CU_RETURN_IF_ERROR(d->cuDevicePrimaryCtxRetain(&dev->context, dev->handle), "cuDevicePrimaryCtxRetain");
  return dev;
}

}  // namespace

Result<const Device*> device(int ordinal) {
  static std::mutex mu;
  static auto* devices = new std::map<int, std::unique_ptr<Device>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  auto it = devices->find(ordinal);
  if (it != devices->end()) return static_cast<const Device*>(it->second.get());
  RAGDOT_ASSIGN_OR_RETURN(std::unique_ptr<Device> dev, open(ordinal));
  const Device* p = dev.get();
  devices->emplace(ordinal, std::move(dev));
  return p;
}

}  // namespace ragdot::cuda
