#include "backends/cpu/cpu_features.hpp"

#include "core/env.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define RAGDOT_X86 1
#else
#define RAGDOT_X86 0
#endif

namespace ragdot::cpu {

namespace {

#if RAGDOT_X86
unsigned long long xgetbv0() {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#if RAGDOT_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave) return f;
  const unsigned long long xcr0 = xgetbv0();
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;  // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  const bool tile_state = (xcr0 & (3ull << 17)) == (3ull << 17);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  unsigned a1, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  const bool avx512_bf16 = a1 & (1u << 5);
  f.avx512 = zmm_state && avx512f && avx512dq && avx512bw && avx512vl && fma && f16c;
  f.avx512_bf16 = f.avx512 && avx512_bf16;
  if (f.avx512_bf16 && amx_bf16 && amx_tile && tile_state) {
#if defined(__linux__)
    // Linux hands out the large tile state only to processes that ask for it.
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    f.amx_bf16 = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#endif
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512_bf16";
    case Isa::kAmx: return "amx";
  }
  return "?";
}

Isa best_isa() {
  const auto& f = cpu_features();
  Isa isa = f.amx_bf16 ? Isa::kAmx : f.avx512_bf16 ? Isa::kAvx512Bf16 : f.avx512 ? Isa::kAvx512 : Isa::kScalar;
  if (auto cap = env::cpu_isa()) {
    Isa limit = isa;
    if (*cap == "scalar") limit = Isa::kScalar;
    else if (*cap == "avx512") limit = Isa::kAvx512;
    else if (*cap == "avx512_bf16") limit = Isa::kAvx512Bf16;
    else if (*cap == "amx") limit = Isa::kAmx;
    if (int(limit) < int(isa)) isa = limit;
  }
  return isa;
}

std::string describe_cpu() {
  const auto& f = cpu_features();
  std::string s = "x86-64";
  if (f.avx512) s += " avx512";
  if (f.avx512_bf16) s += " avx512_bf16";
  if (f.amx_bf16) s += " amx_bf16";
  return s + " (using " + isa_name(best_isa()) + ")";
}

}  // namespace ragdot::cpu
