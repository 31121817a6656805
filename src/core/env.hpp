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
// RAGDOT_DUMP_SASS / RAGDOT_DUMP_PTX: write generated kernels' machine code / PTX next to the cache.
inline bool dump_sass() { return flag("RAGDOT_DUMP_SASS"); }
inline bool dump_ptx() { return flag("RAGDOT_DUMP_PTX"); }
// RAGDOT_CHECKED: verify group sizes on the device at execute time (like PlanOptions::checked).
inline bool checked() { return flag("RAGDOT_CHECKED"); }
// RAGDOT_DEBUG: say once, on stderr, why an op was not taken by a backend or a lowering.
inline bool debug() { return flag("RAGDOT_DEBUG"); }

}  // namespace ragdot::env
