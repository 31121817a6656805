// NVRTC, loaded at run time: compiles generated kernel source to a cubin for one architecture.
// Works without a GPU (CI compiles every variant this way).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ragdot/status.hpp"

namespace ragdot::cuda {

struct SourceFile {
  std::string name;  // as included: "ragdot/common.cuh"
  std::string text;
};

struct CompileOutput {
  std::vector<char> cubin;
  std::string log;  // NVRTC's log, with ptxas's resource report (registers, spills)
  double milliseconds = 0.0;
};

// "13.0"; empty when NVRTC cannot be loaded (`why` says why).
std::string nvrtc_version(std::string* why = nullptr);
// The loaded NVRTC build, for cache keys: its version and the file the library resolved to, with
// its size ("13.0 libnvrtc.so.13.0.88 94105232"), since nvrtcVersion gives no patch level and a
// patch release may compile differently. Empty when NVRTC cannot be loaded.
std::string nvrtc_build();

// The options every compile uses for `arch` ("sm_90a", "sm_80").
std::vector<std::string> compile_options(const std::string& arch);

Result<CompileOutput> compile_to_cubin(const std::string& source, const std::string& source_name,
                                       const std::vector<SourceFile>& headers, const std::string& arch);

}  // namespace ragdot::cuda
