#include "ep/nccl_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/cuda/shared_library.hpp"
#include "core/env.hpp"

namespace ragdot::ep {

namespace {

#define RAGDOT_NCCL_STRINGIFY_(x) #x
#define RAGDOT_NCCL_STRINGIFY(x) RAGDOT_NCCL_STRINGIFY_(x)

struct Loaded {
  NcclApi api;
  bool ok = false;
  std::string why;
};

Loaded load(const std::vector<std::string>& candidates) {
  Loaded l;
  // NVLink multicast (NVLS) stays off unless the user asked for it; NCCL reads the variable when
  // a communicator is first set up, so this precedes every NCCL call.
  ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  std::string failures;
  void* lib = cuda::open_first_library(candidates, failures);
  if (!lib) {
    l.why = "NCCL not loadable (" + failures + "); install NCCL or set RAGDOT_NCCL_LIBRARY";
    return l;
  }
#define RAGDOT_NCCL_FN(name) l.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, RAGDOT_NCCL_STRINGIFY(name)));
#include "ep/nccl_functions.inc"
#undef RAGDOT_NCCL_FN
  bool complete = true;
#define RAGDOT_NCCL_FN(name) complete = complete && l.api.name != nullptr;
#include "ep/nccl_functions.inc"
#undef RAGDOT_NCCL_FN
  if (!complete) {
    l.why = "the NCCL library loaded lacks entry points ragdot needs (NCCL 2.13 or newer)";
    return l;
  }
  l.api.ncclGetVersion(&l.api.version);
  l.ok = true;
  return l;
}

}  // namespace

const NcclApi* load_nccl(const std::vector<std::string>& candidates, std::string* why) {
  static std::mutex mu;
  static std::map<std::vector<std::string>, Loaded> loaded;  // never erased: pointers stay valid
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(candidates);
  if (it == loaded.end()) it = loaded.emplace(candidates, load(candidates)).first;
  if (!it->second.ok) {
    if (why) *why = it->second.why;
    return nullptr;
  }
  return &it->second.api;
}

const NcclApi* nccl(std::string* why) {
  if (auto path = env::nccl_library()) return load_nccl({*path}, why);
  return load_nccl({"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"}, why);
}

Status nccl_status(const NcclApi& api, ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::ok();
  std::string text = std::string(what) + ": " + api.ncclGetErrorString(r);
  if (const char* last = api.ncclGetLastError(nullptr); last && *last) text += std::string(" (") + last + ")";
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) return invalid_argument(text);
  if (r == ncclUnhandledCudaError || r == ncclSystemError || r == ncclRemoteError) return unavailable(text);
  return internal_error(text);
}

}  // namespace ragdot::ep
