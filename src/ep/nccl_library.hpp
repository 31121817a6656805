// NCCL, loaded at run time with dlopen (RAGDOT_NCCL_LIBRARY, else the default names), so
// that the library loads and its CPU backends run where NCCL is not installed. Only the files of
// this directory see NCCL's types; public headers never do.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "ragdot/status.hpp"

namespace ragdot::ep {

struct NcclApi {
#define RAGDOT_NCCL_FN(name) decltype(&::name) name = nullptr;
#include "ep/nccl_functions.inc"
#undef RAGDOT_NCCL_FN
  int version = 0;  // as NCCL_VERSION_CODE: 22809 for 2.28.9
};

// The first of `candidates` that loads and has every entry point, loaded once per list of names
// (the process keeps it); null with `why` otherwise. Sets NCCL_NVLS_ENABLE=0 first when unset.
const NcclApi* load_nccl(const std::vector<std::string>& candidates, std::string* why);

// NCCL by RAGDOT_NCCL_LIBRARY, else libnccl.so.2, libnccl.so, /usr/local/cuda/lib64/libnccl.so.2.
const NcclApi* nccl(std::string* why = nullptr);

// An error status naming the call and NCCL's message (and its last error text), or ok.
Status nccl_status(const NcclApi& api, ncclResult_t r, const char* what);

}  // namespace ragdot::ep
