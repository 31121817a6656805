// Every environment variable ragdot reads, in one place (documented in docs/ENVIRONMENT.md).
#pragma once

#include <optional>
#include <string>

namespace ragdot::env {

std::optional<std::string> get(const char* name);  // unset or empty -> nullopt
bool flag(const char* name);                       // "1", "true", "yes", "on" -> true

// RAGDOT_BACKEND: backend used when a plan names none.
inline std::optional<std::string> backend() { return get("RAGDOT_BACKEND"); }
// RAGDOT_PRINT_PLAN: print every plan to stderr when it is made.
inline bool print_plan() { return flag("RAGDOT_PRINT_PLAN"); }
// RAGDOT_NUM_THREADS: threads of the cpu backends (default: all hardware threads).
int num_threads();
// RAGDOT_CPU_ISA: cap the cpu backend's instruction set ("amx", "avx512_bf16", "avx512", "scalar").
inline std::optional<std::string> cpu_isa() { return get("RAGDOT_CPU_ISA"); }
// RAGDOT_CACHE_DIR: the JIT cache directory (default $XDG_CACHE_HOME/ragdot or ~/.cache/ragdot).
std::string cache_dir();
// RAGDOT_DUMP_SOURCE: write each generated kernel's CUDA source to <cache dir>/dump/ when compiled.
inline bool dump_source() { return flag("RAGDOT_DUMP_SOURCE"); }
// RAGDOT_DUMP_SASS: write each compiled kernel's cubin, NVRTC/ptxas log and, when cuobjdump is on
// PATH, its SASS to <cache dir>/dump/.
inline bool dump_sass() { return flag("RAGDOT_DUMP_SASS"); }
// RAGDOT_NVRTC_LIBRARY: path of the NVRTC shared library to load (default: libnvrtc.so.13, .12).
inline std::string nvrtc_library() { return get("RAGDOT_NVRTC_LIBRARY").value_or(""); }
// RAGDOT_CUBLAS_LIBRARY: path of the cuBLAS shared library to load (default: libcublas.so.13, .so).
inline std::optional<std::string> cublas_library() { return get("RAGDOT_CUBLAS_LIBRARY"); }
// RAGDOT_CUDA_ARCH: compile GPU kernels for this architecture instead of the device's ("sm_80").
inline std::optional<std::string> cuda_arch() { return get("RAGDOT_CUDA_ARCH"); }
// RAGDOT_CUDA_VARIANT: override the cuda backend's tile choice ("bn=128,stages=4"), for tuning.
inline std::optional<std::string> cuda_variant() { return get("RAGDOT_CUDA_VARIANT"); }
// RAGDOT_PLAN_EFFORT: "measure" makes every plan a measured one (PlanningEffort::kMeasure).
inline std::optional<std::string> plan_effort() { return get("RAGDOT_PLAN_EFFORT"); }
// RAGDOT_CHECKED: verify group sizes on the device at execute time (like PlanOptions::checked).
inline bool checked() { return flag("RAGDOT_CHECKED"); }
// RAGDOT_DEBUG: say once, on stderr, why an op was not taken by a backend or a lowering.
inline bool debug() { return flag("RAGDOT_DEBUG"); }

// RAGDOT_MOE_SORT: the device MoE permutation's sort kernel ("chunked" or "one_block").
inline std::optional<std::string> moe_sort() { return get("RAGDOT_MOE_SORT"); }
// RAGDOT_MOE_ROWS: the device MoE permutation's row kernels, gather and combine backward ("block" or "warps").
inline std::optional<std::string> moe_rows() { return get("RAGDOT_MOE_ROWS"); }

// Expert parallelism (ragdot/ep_transport.hpp).
// RAGDOT_NCCL_LIBRARY: path (or soname) of the NCCL library to load (default: libnccl.so.2, .so).
inline std::optional<std::string> nccl_library() { return get("RAGDOT_NCCL_LIBRARY"); }
// RAGDOT_EP_RANK, RAGDOT_EP_WORLD_SIZE, RAGDOT_EP_DEVICE, RAGDOT_EP_ID, RAGDOT_EP_ID_FILE,
// RAGDOT_EP_TIMEOUT: read by ep::bootstrap_from_env (one process per GPU).
inline std::optional<std::string> ep_rank() { return get("RAGDOT_EP_RANK"); }
inline std::optional<std::string> ep_world_size() { return get("RAGDOT_EP_WORLD_SIZE"); }
inline std::optional<std::string> ep_device() { return get("RAGDOT_EP_DEVICE"); }
inline std::optional<std::string> ep_id() { return get("RAGDOT_EP_ID"); }
inline std::optional<std::string> ep_id_file() { return get("RAGDOT_EP_ID_FILE"); }
inline std::optional<std::string> ep_timeout() { return get("RAGDOT_EP_TIMEOUT"); }

}  // namespace ragdot::env
