#include "element_values.hpp"

#include <cmath>
#include <cstring>

namespace ragdot::cli {

namespace {

float bits_to_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double half_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) {
    v = std::ldexp(double(mantissa), -24);  // subnormal
  } else if (exponent == 31) {
    v = mantissa ? std::nan("") : INFINITY;
  } else {
    v = std::ldexp(double(mantissa | 0x400), exponent - 25);
  }
  return sign ? -v : v;
}

}  // namespace

double element_as_double(const void* data, DType dtype, std::int64_t index) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, bytes + index * 4, 4);
      return f;
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, bytes + index * 8, 8);
      return d;
    }
    case DType::kBF16: {
      std::uint16_t u;
      std::memcpy(&u, bytes + index * 2, 2);
      return bits_to_float(std::uint32_t(u) << 16);
    }
    case DType::kF16: {
      std::uint16_t u;
      std::memcpy(&u, bytes + index * 2, 2);
      return half_to_double(u);
    }
    default: return std::nan("");
  }
}

}  // namespace ragdot::cli
