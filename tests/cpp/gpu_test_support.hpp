// Shared by the GPU tests: the first GPU's memory (or a skip), the group-size patterns every GPU
// backend is checked on, and the [g, n, k] weight layout of mode 1.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "verify/check.hpp"

namespace ragdot::gpu_test {

inline verify::MemoryOps* gpu() {
  static std::string why;
  static verify::MemoryOps* m = verify::memory_for(MemorySpace::kDevice, &why);
  return m;
}

#define REQUIRE_GPU() \
  if (!::ragdot::gpu_test::gpu()) GTEST_SKIP() << "no GPU here"

inline const verify::GroupPattern kPatterns[] = {
    verify::GroupPattern::kRandom,   verify::GroupPattern::kZeros,   verify::GroupPattern::kAllInOne,
    verify::GroupPattern::kPartialSum, verify::GroupPattern::kAllEmpty, verify::GroupPattern::kUniform,
    verify::GroupPattern::kPrimes};

// mode 1 with rhs [g, n, k] (shaped_case makes [g, k, n])
inline verify::Case weights_nk(std::int64_t m, std::int64_t k, std::int64_t n, const std::vector<std::int64_t>& gs,
                               DType dt, DType out) {
  verify::Case c;
  const std::int64_t g = std::int64_t(gs.size());
  c.spec.lhs = {dt, {m, k}};
  c.spec.rhs = {dt, {g, n, k}};
  c.spec.group_sizes = {DType::kI32, {g}};
  c.spec.dims.dot = {{1}, {2}, {}, {}};
  c.spec.dims.lhs_ragged = {0};
  c.spec.dims.rhs_group = {0};
  c.spec.preferred_element_type = out;
  c.group_sizes = gs;
  c.description = "mode1 rhs [g,n,k] m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n);
  return c;
}

}  // namespace ragdot::gpu_test
