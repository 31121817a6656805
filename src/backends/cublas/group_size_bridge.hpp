// The bridge from run time to plan time for backends whose library takes shapes on the host: the
// group sizes (and group offset) are copied from the device into pinned host memory on the
// caller's stream, an event is recorded after the copies and the host waits for it, then the sizes
// are checked and turned into group starts. All storage is made when the plan is made; execute
// allocates nothing. Also owns the pinned staging area a plan uploads its per-group arrays from.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cuda/device.hpp"
#include "core/problem.hpp"
#include "ragdot/plan.hpp"

namespace ragdot::cublas {

class GroupSizeBridge {
 public:
  // `staging_bytes` of pinned memory for the caller's uploads (may be 0).
  static Result<std::unique_ptr<GroupSizeBridge>> create(const cuda::Device& device, const core::GroupGemmProblem& p,
                                                         std::size_t staging_bytes);
  ~GroupSizeBridge();
  GroupSizeBridge(const GroupSizeBridge&) = delete;
  GroupSizeBridge& operator=(const GroupSizeBridge&) = delete;

  // Copies, waits, checks. The device's context must be current. On error nothing was written.
  Status fetch(const ExecuteArgs& args, CUstream stream);
  const std::int64_t* starts() const { return starts_.data(); }  // rows * (num_groups + 1)
  std::int64_t group_offset() const { return group_offset_; }

  // The staging area: wait_staging() blocks until the last upload enqueued from it has been read,
  // so the host may overwrite it; staged() records that an upload from it was enqueued on `stream`.
  void* staging() const { return staging_; }
  Status wait_staging();
  Status staged(CUstream stream);

 private:
  GroupSizeBridge(const cuda::Device& device, const core::GroupGemmProblem& p);
  CUcontext context_;
  const core::GroupGemmProblem p_;
  std::int64_t rows_ = 0;
  std::size_t gs_bytes_ = 0;
  void* pinned_ = nullptr;    // group sizes, then the group offset
  void* staging_ = nullptr;
  CUevent fetched_ = nullptr, uploaded_ = nullptr;
  bool upload_pending_ = false;
  std::vector<std::int64_t> starts_;
  std::int64_t group_offset_ = 0;
};

// Milliseconds since `t0`: the bridge's cost as execute reports it.
double elapsed_ms(std::chrono::steady_clock::time_point t0);

// What every execute of a bridging plan holds: the plan's lock (its host storage is reused), the
// time the bridge started, and the device's context made current.
struct ExecuteScope {
  std::lock_guard<std::mutex> lock;
  std::chrono::steady_clock::time_point start;
  cuda::ScopedContext context;
  ExecuteScope(std::mutex& mu, CUcontext ctx) : lock(mu), start(std::chrono::steady_clock::now()), context(ctx) {}
};

}  // namespace ragdot::cublas
