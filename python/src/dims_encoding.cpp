#include "dims_encoding.hpp"

#include <string>

namespace ragdot::python {

Result<RaggedDotDimensionNumbers> decode_dims(std::span<const std::int64_t> flat) {
  RaggedDotDimensionNumbers d;
  std::vector<std::int64_t>* lists[] = {&d.dot.lhs_contracting, &d.dot.rhs_contracting, &d.dot.lhs_batch,
                                        &d.dot.rhs_batch,       &d.lhs_ragged,          &d.rhs_group};
  std::size_t at = 0;
  for (auto* list : lists) {
    if (at >= flat.size() || flat[at] < 0 || std::size_t(flat[at]) > flat.size() - at - 1) {
      return invalid_argument("malformed dimension-number attribute of " + std::to_string(flat.size()) + " values");
    }
    const std::size_t n = std::size_t(flat[at++]);
    list->assign(flat.begin() + std::ptrdiff_t(at), flat.begin() + std::ptrdiff_t(at + n));
    at += n;
  }
  if (at != flat.size()) return invalid_argument("dimension-number attribute has trailing values");
  return d;
}

}  // namespace ragdot::python
