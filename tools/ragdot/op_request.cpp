#include "op_request.hpp"

namespace ragdot::cli {

Result<RaggedDot> make_op(const OpRequest& r) {
  RaggedDotSpec spec;
  spec.lhs.dtype = spec.rhs.dtype = r.dtype;
  spec.group_sizes = {r.group_sizes_dtype, {r.groups}};
  spec.preferred_element_type = r.out_dtype;
  if (r.local_groups) spec.group_offset = GroupOffset{*r.local_groups};
  RaggedDotDimensionNumbers& dims = spec.dims;
  dims.dot = {};
  dims.rhs_group.clear();
  switch (r.mode) {
    case 1:
      dims = RaggedDotDimensionNumbers::ragged_dot();
      spec.lhs.shape = {r.m, r.k};
      // with a group offset the rhs holds only the local groups' weights
      spec.rhs.shape = {r.local_groups.value_or(r.groups), r.k, r.n};
      break;
    case 2:
      spec.lhs.shape = {r.k, r.m};
      spec.rhs.shape = {r.k, r.n};
      dims.dot.lhs_contracting = {0};
      dims.dot.rhs_contracting = {0};
      dims.lhs_ragged = {0};
      break;
    case 3:
      spec.lhs.shape = {r.batch, r.m, r.k};
      spec.rhs.shape = {r.batch, r.k, r.n};
      dims.dot.lhs_batch = {0};
      dims.dot.rhs_batch = {0};
      dims.dot.lhs_contracting = {2};
      dims.dot.rhs_contracting = {1};
      dims.lhs_ragged = {0};
      break;
    default: return invalid_argument("mode must be 1, 2 or 3, not " + std::to_string(r.mode));
  }
  return RaggedDot::create(std::move(spec));
}

}  // namespace ragdot::cli
