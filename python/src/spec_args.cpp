#include "spec_args.hpp"

#include "dims_encoding.hpp"

namespace ragdot::python {

namespace {

Result<DType> dtype_named(const std::string& name, const char* what) {
  auto dt = parse_dtype(name);
  if (!dt) return unsupported(std::string(what) + " dtype " + name + " is not one ragdot takes");
  return *dt;
}

}  // namespace

Result<RaggedDotSpec> make_spec(const SpecArgs& a) {
  RaggedDotSpec spec;
  RAGDOT_ASSIGN_OR_RETURN(spec.lhs.dtype, dtype_named(a.lhs_dtype, "lhs"));
  RAGDOT_ASSIGN_OR_RETURN(spec.rhs.dtype, dtype_named(a.rhs_dtype, "rhs"));
  RAGDOT_ASSIGN_OR_RETURN(spec.group_sizes.dtype, dtype_named(a.gs_dtype, "group_sizes"));
  spec.lhs.shape = a.lhs_shape;
  spec.rhs.shape = a.rhs_shape;
  spec.group_sizes.shape = a.gs_shape;
  RAGDOT_ASSIGN_OR_RETURN(spec.dims, decode_dims(a.dims));
  if (a.preferred_element_type) {
    RAGDOT_ASSIGN_OR_RETURN(DType p, dtype_named(*a.preferred_element_type, "preferred_element_type"));
    spec.preferred_element_type = p;
  }
  if (a.local_groups) spec.group_offset = GroupOffset{*a.local_groups};
  return spec;
}

}  // namespace ragdot::python
