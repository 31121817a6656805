// The XLA FFI handler for the CPU platform: host buffers, a host-memory backend (cpu, else the
// reference), the plan cached per signature.
#include "ffi_call.hpp"
#include "ffi_handlers.hpp"
#include "host_workspace.hpp"
#include "plan_cache.hpp"

namespace ragdot::python {

namespace {

ffi::Error ragged_dot_cpu(ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer group_sizes,
                          ffi::AnyBuffer group_offset, ffi::Result<ffi::AnyBuffer> out, ffi::RemainingRets,
                          ffi::Span<const std::int64_t> dims, std::int64_t local_groups) {
  return without_exceptions([&]() -> ffi::Error {
    const FfiOperands call{lhs, rhs, group_sizes, group_offset, *out};
    auto spec = spec_from_call(call, dims, local_groups);
    if (!spec.ok()) return to_ffi_error(spec.status());
    auto plan = cached_plan(*spec, PlanTarget{MemorySpace::kHost, "", 0});
    if (!plan.ok()) return to_ffi_error(plan.status());
    ExecuteArgs args = execute_args(call, *spec, MemorySpace::kHost);
    if (plan->workspace_bytes()) args.workspace = host_workspace(plan->workspace_bytes());
    return to_ffi_error(plan->execute(args));
  });
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(ragdot_ragged_dot_cpu, ragged_dot_cpu, bind_operands(ffi::Ffi::Bind()));

}  // namespace ragdot::python
