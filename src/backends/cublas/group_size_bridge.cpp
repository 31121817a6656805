#include "backends/cublas/group_size_bridge.hpp"

#include "core/group_sizes.hpp"

namespace ragdot::cublas {

GroupSizeBridge::GroupSizeBridge(const cuda::Device& device, const core::GroupGemmProblem& p)
    : context_(device.context), p_(p) {
  rows_ = p.num_groups > 0 ? p.gs_elements / p.num_groups : 0;
  gs_bytes_ = std::size_t(p.gs_elements) * dtype_size(p.gs_dtype);
  starts_.assign(std::size_t(rows_ * (p.num_groups + 1)) + 1, 0);
}

Result<std::unique_ptr<GroupSizeBridge>> GroupSizeBridge::create(const cuda::Device& device,
                                                                 const core::GroupGemmProblem& p,
                                                                 std::size_t staging_bytes) {
  std::unique_ptr<GroupSizeBridge> b(new GroupSizeBridge(device, p));
  const cuda::DriverApi* d = cuda::driver();
  cuda::ScopedContext scope(device.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  // the group offset after the sizes, 8-byte aligned
  const std::size_t pinned_bytes = (b->gs_bytes_ + 7) / 8 * 8 + 8;
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemHostAlloc(&b->pinned_, pinned_bytes, 0), "cuMemHostAlloc (group sizes)");
  if (staging_bytes) {
    RAGDOT_CU_RETURN_IF_ERROR(d->cuMemHostAlloc(&b->staging_, staging_bytes, 0), "cuMemHostAlloc (staging)");
  }
  RAGDOT_CU_RETURN_IF_ERROR(d->cuEventCreate(&b->fetched_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuEventCreate(&b->uploaded_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return b;
}

GroupSizeBridge::~GroupSizeBridge() {
  const cuda::DriverApi* d = cuda::driver();
  if (!d) return;
  cuda::ScopedContext scope(context_);
  if (uploaded_) {
    if (upload_pending_) d->cuEventSynchronize(uploaded_);  // an upload may still read the staging area
    d->cuEventDestroy(uploaded_);
  }
  if (fetched_) d->cuEventDestroy(fetched_);
  if (staging_) d->cuMemFreeHost(staging_);
  if (pinned_) d->cuMemFreeHost(pinned_);
}

Status GroupSizeBridge::fetch(const ExecuteArgs& a, CUstream stream) {
  const cuda::DriverApi* d = cuda::driver();
  char* host = static_cast<char*>(pinned_);
  char* host_offset = host + (gs_bytes_ + 7) / 8 * 8;
  if (gs_bytes_) {
    RAGDOT_CU_RETURN_IF_ERROR(d->cuMemcpyDtoHAsync(host, reinterpret_cast<CUdeviceptr>(a.group_sizes.data), gs_bytes_,
                                                   stream),
                              "cuMemcpyDtoHAsync (group sizes)");
  }
  if (p_.has_group_offset) {
    RAGDOT_CU_RETURN_IF_ERROR(
        d->cuMemcpyDtoHAsync(host_offset, reinterpret_cast<CUdeviceptr>(a.group_offset.data), 4, stream),
        "cuMemcpyDtoHAsync (group offset)");
  }
  RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(fetched_, stream), "cuEventRecord");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuEventSynchronize(fetched_), "cuEventSynchronize (group sizes)");
  // Host paths check: a bad size is an error before anything is written.
  RAGDOT_RETURN_IF_ERROR(
      core::compute_group_starts(host, p_.gs_dtype, rows_, p_.num_groups, p_.ragged_extent, starts_.data()));
  group_offset_ = 0;
  if (p_.has_group_offset) {
    RAGDOT_RETURN_IF_ERROR(core::read_group_offset(host_offset, p_.computed_groups, p_.num_groups, group_offset_));
  }
  return Status::ok();
}

Status GroupSizeBridge::wait_staging() {
  if (!upload_pending_) return Status::ok();
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuEventSynchronize(uploaded_), "cuEventSynchronize (staging)");
  upload_pending_ = false;
  return Status::ok();
}

Status GroupSizeBridge::staged(CUstream stream) {
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuEventRecord(uploaded_, stream), "cuEventRecord");
  upload_pending_ = true;
  return Status::ok();
}

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ragdot::cublas
