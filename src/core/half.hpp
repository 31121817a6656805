// bf16 / f16 <-> f32 conversions on the host, round-to-nearest-even, NaN-preserving.
#pragma once

#include <cstdint>
#include <cstring>

namespace ragdot::core {

inline float bits_to_f32(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint32_t f32_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_f32(std::uint16_t h) { return bits_to_f32(std::uint32_t(h) << 16); }

inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

inline float f16_to_f32(std::uint16_t h) {
  std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_to_f32(sign);
    // subnormal: value = mant * 2^-24
    float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (mant << 13));
  return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline std::uint16_t f32_to_f16(float f) {
  std::uint32_t u = f32_to_bits(f);
  std::uint32_t sign = (u >> 16) & 0x8000u;
  std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return std::uint16_t(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);  // overflow (rounds to inf)
  if (abs < 0x38800000u) {  // below the smallest normal f16: subnormal or zero
    // f16 subnormal = round(|f| * 2^24); the f32 add trick rounds to nearest even.
    float a = bits_to_f32(abs);
    float r = a * 16777216.0f;  // exact scaling by 2^24
    // round half to even on an integer grid
    std::uint32_t q = static_cast<std::uint32_t>(r);
    float frac = r - float(q);
    if (frac > 0.5f || (frac == 0.5f && (q & 1u))) ++q;
    return std::uint16_t(sign | q);
  }
  std::uint32_t mant_round = abs + 0x0fffu + ((abs >> 13) & 1u);
  return std::uint16_t(sign | ((mant_round - 0x38000000u) >> 13));
}

}  // namespace ragdot::core
