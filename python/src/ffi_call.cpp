#include "ffi_call.hpp"

#include <span>
#include <string>

#include "dims_encoding.hpp"

namespace ragdot::python {

namespace {

Result<DType> to_dtype(ffi::DataType t, const char* what) {
  switch (t) {
    case ffi::DataType::F32: return DType::kF32;
    case ffi::DataType::F16: return DType::kF16;
    case ffi::DataType::BF16: return DType::kBF16;
    case ffi::DataType::S32: return DType::kI32;
    case ffi::DataType::S64: return DType::kI64;
    default: return unsupported(std::string(what) + " has an element type ragdot does not take");
  }
}

Result<TensorSpec> to_tensor(const ffi::AnyBuffer& b, const char* what) {
  TensorSpec t;
  RAGDOT_ASSIGN_OR_RETURN(t.dtype, to_dtype(b.element_type(), what));
  auto dims = b.dimensions();
  t.shape.assign(dims.begin(), dims.end());
  return t;
}

std::size_t bytes_of(const ffi::AnyBuffer& b) { return b.size_bytes(); }

}  // namespace

Result<RaggedDotSpec> spec_from_call(const FfiOperands& call, ffi::Span<const std::int64_t> dims,
                                     std::int64_t local_groups) {
  RaggedDotSpec spec;
  RAGDOT_ASSIGN_OR_RETURN(spec.lhs, to_tensor(call.lhs, "lhs"));
  RAGDOT_ASSIGN_OR_RETURN(spec.rhs, to_tensor(call.rhs, "rhs"));
  RAGDOT_ASSIGN_OR_RETURN(spec.group_sizes, to_tensor(call.group_sizes, "group_sizes"));
  RAGDOT_ASSIGN_OR_RETURN(TensorSpec out, to_tensor(call.out, "output"));
  RAGDOT_ASSIGN_OR_RETURN(spec.dims, decode_dims(std::span<const std::int64_t>(dims.begin(), dims.size())));
  spec.preferred_element_type = out.dtype;
  if (local_groups >= 0) spec.group_offset = GroupOffset{local_groups};
  return spec;
}

ExecuteArgs execute_args(const FfiOperands& call, const RaggedDotSpec& spec, MemorySpace space) {
  ExecuteArgs a;
  a.lhs = {call.lhs.untyped_data(), bytes_of(call.lhs), space};
  a.rhs = {call.rhs.untyped_data(), bytes_of(call.rhs), space};
  a.group_sizes = {call.group_sizes.untyped_data(), bytes_of(call.group_sizes), space};
  if (spec.group_offset) a.group_offset = {call.group_offset.untyped_data(), bytes_of(call.group_offset), space};
  a.out = {call.out.untyped_data(), bytes_of(call.out), space};
  return a;
}

ffi::Error to_ffi_error(const Status& status) {
  if (status.is_ok()) return ffi::Error::Success();
  const ffi::ErrorCode code = status.code() == StatusCode::kInvalidArgument ? ffi::ErrorCode::kInvalidArgument
                              : status.code() == StatusCode::kUnsupported  ? ffi::ErrorCode::kUnimplemented
                              : status.code() == StatusCode::kUnavailable  ? ffi::ErrorCode::kUnavailable
                                                                           : ffi::ErrorCode::kInternal;
  return ffi::Error(code, "ragdot: " + status.to_string());
}

}  // namespace ragdot::python
