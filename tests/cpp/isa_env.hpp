// Runs a test body once per cpu kernel family this machine has (RAGDOT_CPU_ISA caps the choice).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_features.hpp"

namespace ragdot::testing {

inline std::vector<std::string> isas_here() {
  std::vector<std::string> v = {"scalar"};
  unsetenv("RAGDOT_CPU_ISA");
  const auto best = cpu::best_isa();
  if (best >= cpu::Isa::kAvx512) v.push_back("avx512");
  if (best >= cpu::Isa::kAvx512Bf16) v.push_back("avx512_bf16");
  if (best >= cpu::Isa::kAmx) v.push_back("amx");
  return v;
}

struct ScopedIsa {
  explicit ScopedIsa(const std::string& isa) { setenv("RAGDOT_CPU_ISA", isa.c_str(), 1); }
  ~ScopedIsa() { unsetenv("RAGDOT_CPU_ISA"); }
};

}  // namespace ragdot::testing
