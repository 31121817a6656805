// Run-time CPU detection for the cpu backend's kernels.
#pragma once

#include <string>

namespace ragdot::cpu {

enum class Isa : int { kScalar = 0, kAvx512 = 1, kAvx512Bf16 = 2, kAmx = 3 };

struct CpuFeatures {
  bool avx512 = false;       // F, BW, VL, DQ, FMA, F16C and OS support for zmm state
  bool avx512_bf16 = false;
  bool amx_bf16 = false;     // AMX-TILE + AMX-BF16, OS support and the process's permission
};

// Detected once; AMX permission is requested from the kernel on first call.
const CpuFeatures& cpu_features();
// The best instruction set here, capped by RAGDOT_CPU_ISA.
Isa best_isa();
const char* isa_name(Isa isa);
std::string describe_cpu();

}  // namespace ragdot::cpu
