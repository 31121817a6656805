// What the CPU and CUDA XLA handlers share: the spec of one custom call, read from its buffers
// and attributes, and the ragdot Status as an XLA FFI error.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "ragdot/ragdot.hpp"
#include "xla/ffi/api/ffi.h"

namespace ragdot::python {

namespace ffi = ::xla::ffi;

// The call's operands: lhs, rhs, group_sizes, group_offset (int32[1], read only when
// local_groups >= 0) and the output, whose dtype is the preferred element type.
struct FfiOperands {
  ffi::AnyBuffer lhs, rhs, group_sizes, group_offset;
  ffi::AnyBuffer out;  // the result buffer
};

Result<RaggedDotSpec> spec_from_call(const FfiOperands& call, ffi::Span<const std::int64_t> dims,
                                     std::int64_t local_groups);

ExecuteArgs execute_args(const FfiOperands& call, const RaggedDotSpec& spec, MemorySpace space);

ffi::Error to_ffi_error(const Status& status);

// Runs a handler's body with no C++ exception escaping into XLA, which is built without them and
// would terminate the process: an allocation that fails becomes kResourceExhausted, any other
// exception kInternal, both with what they say.
template <class Body>
ffi::Error without_exceptions(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "ragdot: out of host memory");
  } catch (const std::exception& e) {
    return ffi::Error(ffi::ErrorCode::kInternal, std::string("ragdot: ") + e.what());
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal, "ragdot: an unknown exception");
  }
}

// Adds the call's operands and attributes, in FfiOperands order, to a binding that already has
// its platform's context.
template <class Binding>
auto bind_operands(Binding binding) {
  return std::move(binding)  // bindings are built from rvalues
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .RemainingRets()  // the CUDA handler's workspace, when ragdot.jax adds one
      .template Attr<ffi::Span<const std::int64_t>>("dims")
      .template Attr<std::int64_t>("local_groups");
}

}  // namespace ragdot::python
