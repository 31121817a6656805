// Shared by the MoE GPU tests: device buffers of the first GPU freed at scope end, uploads and
// downloads of host vectors, poisoning, and bf16 <-> f32 conversions (round to nearest even).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.hpp"
#include "gpu_test_support.hpp"

namespace ragdot::moe_test {

using gpu_test::gpu;

// A device buffer of the first GPU, freed at scope end.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) {
    auto r = gpu()->alloc(bytes == 0 ? 4 : bytes);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) p = *r;
  }
  ~DeviceBuffer() {
    if (p) gpu()->free(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <class T>
void upload(DeviceBuffer& d, const std::vector<T>& v) {
  ASSERT_TRUE(gpu()->upload(d.p, v.data(), v.size() * sizeof(T)).is_ok());
}

template <class T>
std::vector<T> download(const DeviceBuffer& d, std::size_t count) {
  std::vector<T> v(count);
  EXPECT_TRUE(gpu()->synchronize().is_ok());
  EXPECT_TRUE(gpu()->download(v.data(), d.p, count * sizeof(T)).is_ok());
  return v;
}

// 0x7f bytes: NaN as f32, and a huge value (0x7f7f) as bf16; any unwritten output shows.
inline void poison(DeviceBuffer& d, std::size_t bytes) {
  std::vector<unsigned char> junk(bytes, 0x7f);
  ASSERT_TRUE(gpu()->upload(d.p, junk.data(), bytes).is_ok());
}

inline float to_f32(std::uint16_t h) { return core::bf16_to_f32(h); }
inline std::uint16_t to_bf16(float f) { return core::f32_to_bf16(f); }
inline float round_bf16(float f) { return to_f32(to_bf16(f)); }

// Values of x / rows / y as f32, from bf16 or f32 storage.
inline std::vector<float> as_f32(const std::vector<unsigned char>& bytes, DType dt) {
  const std::size_t es = dtype_size(dt), n = bytes.size() / es;
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (dt == DType::kF32) {
      std::memcpy(&v[i], bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = to_f32(h);
    }
  }
  return v;
}
inline std::vector<unsigned char> from_f32(const std::vector<float>& v, DType dt) {
  std::vector<unsigned char> b(v.size() * dtype_size(dt));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kF32) {
      std::memcpy(b.data() + 4 * i, &v[i], 4);
    } else {
      const std::uint16_t h = to_bf16(v[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

// ||got - want|| / ||want|| (0 when both are zero).
inline double rel_frobenius(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += double(want[i]) * want[i];
  }
  if (got.size() != want.size()) return 1e30;
  if (den == 0) return num == 0 ? 0.0 : 1e30;
  return std::sqrt(num / den);
}

}  // namespace ragdot::moe_test
