// The version gate of cuBLASLt's grouped matmul with device-side shapes: the path that would let
// the cublas backend run without copying group sizes to the host. cuBLAS offers it for Hopper from
// 13.4 on, and its declarations come with the headers of CUDA 13.2 and later. A pure function of
// the versions, so that the gate is tested where there is no GPU.
#pragma once

#include "ragdot/status.hpp"

namespace ragdot::cublas {

// Versions as CUBLAS_VERSION writes them: major * 10000 + minor * 100 + patch.
constexpr int kGroupedLtHeaderVersion = 130200;   // headers that declare the device-shape grouped matmul
constexpr int kGroupedLtHopperRuntimeVersion = 130400;  // first cuBLAS that runs it on Hopper

struct GroupedLtQuery {
  int header_version = 0;   // CUBLAS_VERSION of the headers this library was built with
  int runtime_version = 0;  // the cuBLAS loaded at run time
  int cc_major = 0, cc_minor = 0;  // the device
  bool path_built = false;  // whether this build contains the code of the path
};

// ok when the device-shape grouped matmul can run, else unavailable("why"), naming the first
// requirement that is not met.
Status grouped_lt_device_shapes(const GroupedLtQuery& q);

// Whether this build contains the device-shape path (false: its API is not in the headers the
// library was built with, or the path is not written for them yet).
bool grouped_lt_path_built();

}  // namespace ragdot::cublas
