#include "host_rate_probe.hpp"

#include <algorithm>

#include "memory_buffer.hpp"
#include "operand_set.hpp"
#include "ragdot/plan.hpp"
#include "timing.hpp"

namespace ragdot::cli {

namespace {

constexpr double kLongEnoughSeconds = 0.02;
constexpr std::int64_t kGroups = 4;

// One timed run of [m,k] x [4,k,n] with equal groups; returns its seconds.
Result<double> time_probe(const std::string& backend, DType dtype, std::int64_t m, std::int64_t k, std::int64_t n) {
  RAGDOT_ASSIGN_OR_RETURN(RaggedDot op, RaggedDot::ragged_dot(m, k, n, kGroups, dtype));
  PlanOptions options;
  options.backend = backend;
  options.memory_space = MemorySpace::kHost;
  RAGDOT_ASSIGN_OR_RETURN(Plan plan, make_plan(op, options));
  verify::MemoryOps& host = verify::host_memory();
  const std::size_t es = dtype_size(dtype);
  RAGDOT_ASSIGN_OR_RETURN(MemoryBuffer lhs, MemoryBuffer::allocate(host, std::size_t(m * k) * es));
  RAGDOT_ASSIGN_OR_RETURN(MemoryBuffer rhs, MemoryBuffer::allocate(host, std::size_t(kGroups * k * n) * es));
  RAGDOT_ASSIGN_OR_RETURN(MemoryBuffer out, MemoryBuffer::allocate(host, op.out().num_bytes()));
  RAGDOT_ASSIGN_OR_RETURN(MemoryBuffer sizes, MemoryBuffer::allocate(host, kGroups * 4));
  RAGDOT_ASSIGN_OR_RETURN(MemoryBuffer workspace, MemoryBuffer::allocate(host, plan.workspace_bytes()));
  fill_operand(lhs.data(), dtype, m * k, 11);
  fill_operand(rhs.data(), dtype, kGroups * k * n, 12);
  auto* gs = static_cast<std::int32_t*>(sizes.data());
  for (std::int64_t g = 0; g < kGroups; ++g) gs[g] = std::int32_t(m / kGroups);
  ExecuteArgs args;
  args.lhs = lhs.as_const();
  args.rhs = rhs.as_const();
  args.group_sizes = sizes.as_const();
  args.out = out.as_mutable();
  args.workspace = workspace.as_mutable();
  RAGDOT_ASSIGN_OR_RETURN(Timing t, time_median([&] { return plan.execute(args); }, [] { return Status::ok(); },
                                                TimingOptions{1, 1, 0.0}));
  return t.median_seconds;
}

}  // namespace

Result<double> measure_host_flop_rate(const std::string& backend, DType dtype) {
  // 256^3 to start: milliseconds even for the float64 reference loops
  std::int64_t m = 256, k = 256, n = 256;
  while (true) {
    RAGDOT_ASSIGN_OR_RETURN(double seconds, time_probe(backend, dtype, m, k, n));
    const double flops = 2.0 * double(m) * double(k) * double(n);
    if (seconds >= kLongEnoughSeconds || m >= 4096) return flops / std::max(seconds, 1e-9);
    // grow m and n, as an MoE GEMM is wide; k stays at a typical blocking depth
    m *= 2;
    n *= 2;
    if (k < 1024) k *= 2;
  }
}

}  // namespace ragdot::cli
