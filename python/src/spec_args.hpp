// The static signature of one call as Python passes it: shapes, dtype names ("bf16", "float32"),
// the flat dimension numbers (dims_encoding.hpp) and the group offset's local group count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ragdot/ragdot.hpp"

namespace ragdot::python {

struct SpecArgs {
  std::vector<std::int64_t> lhs_shape, rhs_shape, gs_shape;
  std::string lhs_dtype, rhs_dtype, gs_dtype;
  std::vector<std::int64_t> dims;
  std::optional<std::string> preferred_element_type;
  std::optional<std::int64_t> local_groups;
};

Result<RaggedDotSpec> make_spec(const SpecArgs& a);

}  // namespace ragdot::python
