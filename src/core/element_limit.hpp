// The most elements any tensor or buffer ragdot sizes may have. Element and byte counts (at most
// 8 bytes an element), and sums of a few of them, then fit in int64, so no size arithmetic after
// the check can overflow.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>

namespace ragdot::core {

inline constexpr std::int64_t kMaxElements = std::numeric_limits<std::int64_t>::max() / 16;

// Whether the product of the non-negative dims in [first, last) is at most kMaxElements. Zero dims
// are skipped, not multiplied: an empty tensor's strides are products of its other dims
// ([0, 2^40, 2^40] has no elements but a stride of 2^80 in row-major order).
inline bool elements_fit(const std::int64_t* first, const std::int64_t* last) {
  std::int64_t n = 1;
  for (; first != last; ++first) {
    if (*first == 0) continue;
    if (*first > kMaxElements / n) return false;
    n *= *first;
  }
  return true;
}
inline bool elements_fit(std::initializer_list<std::int64_t> dims) { return elements_fit(dims.begin(), dims.end()); }

}  // namespace ragdot::core
