// plan and execute: a Plan is made once from a RaggedDot (static shapes only), then executed many
// times with fresh buffers and group sizes. Executing allocates nothing and takes no shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ragdot/op.hpp"
#include "ragdot/status.hpp"
#include "ragdot/tensor.hpp"

namespace ragdot {

namespace detail {
class BackendPlan;
}

// How much work make_plan may do to pick a variant.
enum class PlanningEffort : std::uint8_t {
  kHeuristic,  // rules per architecture; no timing
  kMeasure,    // time candidate variants on the device (the cuda backend on Hopper; others plan as for
               // kHeuristic): the first plan of a problem takes a second or so and temporary
               // device memory for one set of its operands; RAGDOT_PLAN_EFFORT=measure asks it of
               // every plan
};

struct PlanOptions {
  // A backend name ("cpu", "cpu_ref", "padded", "cuda", "cublas"), or empty to take the first
  // backend in registry order that accepts the op (RAGDOT_BACKEND overrides an empty name).
  std::string backend;
  // Only backends that take buffers in this memory space. With a named backend it picks among the
  // backends of that name: "padded" is the host baseline, or with kDevice the GPU one.
  std::optional<MemorySpace> memory_space;
  PlanningEffort effort = PlanningEffort::kHeuristic;
  // kMeasure only: one row of group sizes (num_groups entries, none negative, summing to at most
  // the ragged dimension) to time the candidates with, such as a router's typical counts. Empty:
  // the ragged dimension split evenly over the groups. The choice is kept per problem, device and
  // sizes (in memory and under RAGDOT_CACHE_DIR/tuning), so later plans of the same problem reuse it.
  std::vector<std::int64_t> measure_group_sizes;
  // Threads for CPU backends; 0 = RAGDOT_NUM_THREADS or all hardware threads.
  int num_threads = 0;
  // Device-side paths normally clamp bad group sizes (see docs). With `checked` they verify them
  // and execute returns an error instead. Host-side paths always check.
  bool checked = false;
  // GPU ordinal for device backends.
  int device = 0;
  // `padded` backend only: the per-group capacity. Unset: dropless, capacity = the largest group
  // at execute time (workspace sized for `padded_max_group_rows`, default the whole ragged extent).
  // Set: capacity = ceil(factor * rows / groups); rows beyond it are dropped (their output is 0).
  std::optional<double> padded_capacity_factor;
  std::optional<std::int64_t> padded_max_group_rows;
  // Gathered lhs rows (mode 1, lhs [M, K], or mode 2, lhs [K, M] ragged along K, with no batch
  // dims): execute's lhs is then a table of this many rows ([R, K] or [R, M]), and
  // ExecuteArgs::lhs_rows an int32 index with one entry per lhs row (M, or K): row i of the op's
  // lhs is table row lhs_rows[i]; an index outside [0, R) reads a row of zeros. An MoE layer passes
  // its tokens and their sorted order here instead of copying every routed row first: for its up
  // projection (mode 1) and that projection's weight gradient (mode 2). Backends that cannot gather
  // do not take such plans (the cuda backend gathers on Hopper, cpu and cpu_ref anywhere).
  std::optional<std::int64_t> lhs_gather_rows;
  // SwiGLU epilogue (mode 1, lhs [M, K], rhs [G, K, N] or [G, N, K] with N even, out [M, N]
  // row-major): the plan's output is the activation [M, N / 2] instead of the product, with
  // gate = the product's columns [0, N / 2) and up = columns [N / 2, N), each first rounded to the
  // output dtype (as a stored product would be), act = silu(gate) * up in f32, rounded to the
  // output dtype. The out buffer holds M x N / 2 elements. An MoE layer's fused gate and up
  // projection then writes its activation directly, without the [M, N] product in between.
  // Backends that cannot do it do not take such plans (the cuda backend on Hopper with 16-bit
  // outputs and an [G, K, N] rhs, cpu_ref anywhere).
  bool swiglu_epilogue = false;
  // Scatter-add of the output rows (mode 1, lhs [M, K], out [M, N] row-major): execute's out is
  // then a float32 table [R, N] with R = this value, ExecuteArgs::out_rows an int32[M] index and
  // ExecuteArgs::row_scales a float32[M]. Row i of the product, rounded to the op's output dtype
  // (as a stored product would be), times row_scales[i], is added in f32 to table row
  // out_rows[i]; an index outside [0, R) drops the row. The table is not cleared first: the plan
  // accumulates into what it holds. The additions' order is not fixed (the cuda backend adds with
  // atomics, several rows into one table row), so the f32 roundoff may differ from run to run. An
  // MoE layer's down projection then adds each expert row, times its combine weight, into its
  // token's output, instead of writing the [T k, H] rows for a combine kernel to read back.
  // Backends that cannot do it do not take such plans (cuda on Hopper, cpu_ref anywhere).
  std::optional<std::int64_t> out_scatter_rows;
};

// Filled by execute when the caller asks for it (host-side backends fill it completely).
struct ExecuteReport {
  std::int64_t dropped_rows = 0;  // rows the padded backend dropped at its capacity
  std::int64_t capacity = 0;      // padded backend: rows per group actually used
  // Backends that copy group sizes to the host (cublas, the GPU padded baseline): host wall time of
  // that bridge, in ms: the device-to-host copy and the wait for it, building the per-group arrays
  // and enqueuing their upload. The GEMM itself is not in it. 0 for other backends.
  double host_bridge_ms = 0.0;
};

// The first seven fields in order: {lhs, rhs, group_sizes, group_offset, out, workspace, stream}.
// The row indices of the gathering and scattering plans come last.
struct ExecuteArgs {
  ConstBuffer lhs;
  ConstBuffer rhs;
  ConstBuffer group_sizes;
  ConstBuffer group_offset;  // int32[1]; only when the op has a GroupOffset
  MutableBuffer out;
  MutableBuffer workspace;   // at least Plan::workspace_bytes(); may be empty when that is 0
  void* stream = nullptr;    // CUstream for device backends; ignored by host backends
  ExecuteReport* report = nullptr;
  ConstBuffer lhs_rows;      // int32[M] (mode 2: [K]); only when planned with PlanOptions::lhs_gather_rows
  ConstBuffer out_rows;      // int32[M]; only when planned with PlanOptions::out_scatter_rows
  ConstBuffer row_scales;    // float32[M]; the same
};

class Plan {
 public:
  const RaggedDot& op() const;
  const std::string& backend() const;
  const std::string& variant() const;
  std::size_t workspace_bytes() const;
  bool graph_safe() const;       // execute may be captured into a CUDA graph and replayed
  bool needs_host_sync() const;  // execute copies group sizes to the host and waits for them
  MemorySpace memory_space() const;
  // One line: backend, variant, mode and shapes, workspace, graph-safe, needs-host-sync.
  std::string to_string() const;

  // Checks every buffer against the plan (null, too small, misaligned, wrong memory space), then
  // runs. On error nothing has been written.
  Status execute(const ExecuteArgs& args) const;

 private:
  friend Result<Plan> make_plan(const RaggedDot& op, const PlanOptions& options);
  Plan() = default;
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

Result<Plan> make_plan(const RaggedDot& op, const PlanOptions& options = {});

struct BackendInfo {
  std::string name;
  bool available = false;
  std::string detail;  // why not available, or what it runs on
  MemorySpace memory_space = MemorySpace::kHost;
  bool automatic = true;  // considered when no backend is named
};

// The registry, in the order automatic selection tries it (the reference last).
std::vector<BackendInfo> list_backends();

}  // namespace ragdot
