// The XLA FFI handler for the CUDA platform: runs the cuda backend on XLA's stream. The plan is
// cached per signature and device, so an execution only fills a kernel's arguments and launches;
// nothing is allocated and nothing waits for the host, which is what lets XLA capture the call in
// a command buffer (CUDA graph). Workspace (the Hopper kernels' tile counter; an operand's
// relayout copy; a checked plan's verdict) comes as an extra result buffer of the call, sized by
// ragdot.jax at trace time on GPU 0; only a checked plan (RAGDOT_CHECKED=1) syncs with the host.
#include <cuda_runtime_api.h>

#include "ffi_call.hpp"
#include "ffi_handlers.hpp"
#include "plan_cache.hpp"

namespace ragdot::python {

namespace {

ffi::Error ragged_dot_cuda(cudaStream_t stream, std::int32_t device, ffi::ScratchAllocator scratch,
                           ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer group_sizes,
                           ffi::AnyBuffer group_offset, ffi::Result<ffi::AnyBuffer> out, ffi::RemainingRets extra,
                           ffi::Span<const std::int64_t> dims, std::int64_t local_groups) {
  return without_exceptions([&]() -> ffi::Error {
    const FfiOperands call{lhs, rhs, group_sizes, group_offset, *out};
    auto spec = spec_from_call(call, dims, local_groups);
    if (!spec.ok()) return to_ffi_error(spec.status());
    auto plan = cached_plan(*spec, PlanTarget{MemorySpace::kDevice, "cuda", device});
    if (!plan.ok()) return to_ffi_error(plan.status());
    ExecuteArgs args = execute_args(call, *spec, MemorySpace::kDevice);
    args.stream = stream;
    if (const std::size_t bytes = plan->workspace_bytes()) {
      // The workspace result ragdot.jax sized at trace time; else XLA's scratch allocator (which
      // has nothing to give inside a command buffer).
      if (extra.size() > 0) {
        auto ws = extra.get<ffi::AnyBuffer>(0);
        if (!ws.has_value()) return ws.error();
        if ((*ws)->size_bytes() < bytes)
          return ffi::Error(ffi::ErrorCode::kInternal, "ragdot: the call's workspace result holds " +
                                                           std::to_string((*ws)->size_bytes()) + " bytes, the plan needs " +
                                                           std::to_string(bytes));
        args.workspace = {(*ws)->untyped_data(), bytes, MemorySpace::kDevice};
      } else {
        auto memory = scratch.Allocate(bytes, 256);
        if (!memory)
          return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                            "ragdot: the plan needs " + std::to_string(bytes) +
                                " bytes of workspace and the call has none (traced where the cuda backend was unavailable?)");
        args.workspace = {*memory, bytes, MemorySpace::kDevice};
      }
    }
    return to_ffi_error(plan->execute(args));
  });
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(ragdot_ragged_dot_cuda, ragged_dot_cuda,
                              bind_operands(ffi::Ffi::Bind()
                                                .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                                .Ctx<ffi::DeviceOrdinal>()
                                                .Ctx<ffi::ScratchAllocator>()),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace ragdot::python
