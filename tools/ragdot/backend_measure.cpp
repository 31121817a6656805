#include "backend_measure.hpp"

#include <algorithm>

#include "host_memory_budget.hpp"
#include "memory_buffer.hpp"

namespace ragdot::cli {

MeasureRequest default_measure_request(std::string backend, int reps) {
  MeasureRequest r;
  r.backend = std::move(backend);
  r.host_timing = {1, 3, 0.0};
  r.device_timing = {3, 10, 0.02};
  if (reps > 0) r.host_timing.reps = r.device_timing.reps = reps;
  return r;
}

Result<BackendMeasurement> measure_backend(const MoeGemmCase& gemm, OperandSet& operands,
                                           const MeasureRequest& request) {
  RAGDOT_ASSIGN_OR_RETURN(RaggedDot op, RaggedDot::ragged_dot(gemm.m, gemm.k, gemm.n, gemm.groups, gemm.dtype));
  PlanOptions options;
  options.backend = request.backend;
  options.memory_space = request.memory_space;
  if (request.backend == "padded") options.padded_max_group_rows = std::max<std::int64_t>(gemm.largest_group(), 1);
  RAGDOT_ASSIGN_OR_RETURN(Plan plan, make_plan(op, options));

  std::string why;
  verify::MemoryOps* memory = verify::memory_for(plan.memory_space(), &why);
  if (memory == nullptr) {
    return unavailable("backend " + plan.backend() + " runs on " + memory_space_name(plan.memory_space()) +
                       " memory, which is not available here: " + why);
  }
  const TensorSpec& out_spec = op.out();
  if (plan.memory_space() == MemorySpace::kHost) {
    RAGDOT_RETURN_IF_ERROR(ensure_host_memory(double(out_spec.num_bytes()) * (request.keep_output ? 2 : 1) +
                                                  double(plan.workspace_bytes()),
                                              "the output and workspace of " + plan.backend()));
  }
  RAGDOT_ASSIGN_OR_RETURN(OperandBuffers in, operands.in(*memory));
  RAGDOT_ASSIGN_OR_RETURN(MemoryBuffer out, MemoryBuffer::allocate(*memory, out_spec.num_bytes()));
  RAGDOT_ASSIGN_OR_RETURN(MemoryBuffer workspace, MemoryBuffer::allocate(*memory, plan.workspace_bytes()));

  BackendMeasurement m;
  m.backend = plan.backend();
  m.variant = plan.variant();
  m.plan_line = plan.to_string();
  m.space = plan.memory_space();
  m.out_dtype = out_spec.dtype;
  if (request.keep_output) {
    // NaN everywhere first, so that an element the backend never writes cannot pass the check
    m.output.resize(out_spec.num_bytes());
    verify::poison(m.output.data(), out_spec.dtype, out_spec.num_elements());
    RAGDOT_RETURN_IF_ERROR(memory->upload(out.data(), m.output.data(), m.output.size()));
  }

  ExecuteArgs args;
  args.lhs = in.lhs;
  args.rhs = in.rhs;
  args.group_sizes = in.group_sizes;
  args.out = out.as_mutable();
  args.workspace = workspace.as_mutable();
  args.stream = memory->stream();
  const TimingOptions& timing = m.space == MemorySpace::kDevice ? request.device_timing : request.host_timing;
  RAGDOT_ASSIGN_OR_RETURN(m.timing, time_median([&] { return plan.execute(args); },
                                                [&] { return memory->synchronize(); }, timing));
  if (request.keep_output) RAGDOT_RETURN_IF_ERROR(memory->download(m.output.data(), out.data(), m.output.size()));
  return m;
}

}  // namespace ragdot::cli
