// plan: choose a backend for a RaggedDot and check execute-time buffers against the plan.
#include "ragdot/plan.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <sstream>
#include <stdexcept>

#include "core/element_limit.hpp"
#include "core/env.hpp"
#include "core/problem.hpp"
#include "planner/backend.hpp"

namespace ragdot {

struct Plan::Impl {
  RaggedDot op;
  core::GroupGemmProblem problem;
  std::string backend;
  std::unique_ptr<detail::BackendPlan> backend_plan;
};

const RaggedDot& Plan::op() const { return impl_->op; }
const std::string& Plan::backend() const { return impl_->backend; }
const std::string& Plan::variant() const { return impl_->backend_plan->variant; }
std::size_t Plan::workspace_bytes() const { return impl_->backend_plan->workspace_bytes; }
bool Plan::graph_safe() const { return impl_->backend_plan->graph_safe; }
bool Plan::needs_host_sync() const { return impl_->backend_plan->needs_host_sync; }
MemorySpace Plan::memory_space() const { return impl_->backend_plan->memory_space; }

namespace {

std::string human_bytes(std::size_t b) {
  char buf[64];
  if (b >= (1u << 30)) std::snprintf(buf, sizeof buf, "%.2fGiB", double(b) / double(1u << 30));
  else if (b >= (1u << 20)) std::snprintf(buf, sizeof buf, "%.2fMiB", double(b) / double(1u << 20));
  else if (b >= (1u << 10)) std::snprintf(buf, sizeof buf, "%.1fKiB", double(b) / double(1u << 10));
  else std::snprintf(buf, sizeof buf, "%zuB", b);
  return buf;
}

Status check_buffer(const char* name, const ConstBuffer& b, std::int64_t elements, DType dtype, MemorySpace space,
                    std::size_t alignment) {
  const std::size_t need = std::size_t(elements) * dtype_size(dtype);
  if (need == 0) return Status::ok();
  if (b.data == nullptr) return invalid_argument(std::string(name) + " is null");
  if (b.bytes < need) {
    return invalid_argument(std::string(name) + " has " + std::to_string(b.bytes) + " bytes; the plan needs " +
                            std::to_string(need));
  }
  if (b.space != space) {
    return invalid_argument(std::string(name) + " is in " + memory_space_name(b.space) + " memory; the plan runs on " +
                            memory_space_name(space) + " memory");
  }
  const std::size_t align = alignment ? alignment : dtype_size(dtype);
  if (reinterpret_cast<std::uintptr_t>(b.data) % align != 0) {
    return invalid_argument(std::string(name) + " is not aligned to " + std::to_string(align) + " bytes");
  }
  return Status::ok();
}

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return an && bn && pa < pb + bn && pb < pa + an;
}

}  // namespace

std::string Plan::to_string() const {
  std::ostringstream os;
  const auto& bp = *impl_->backend_plan;
  os << "plan backend=" << impl_->backend << " variant=" << bp.variant << " " << impl_->problem.to_string()
     << " dtypes=" << dtype_name(impl_->problem.lhs_dtype) << "," << dtype_name(impl_->problem.rhs_dtype) << "->"
     << dtype_name(impl_->problem.out_dtype) << " workspace=" << human_bytes(bp.workspace_bytes)
     << " memory=" << memory_space_name(bp.memory_space) << " graph_safe=" << (bp.graph_safe ? "yes" : "no")
     << " needs_host_sync=" << (bp.needs_host_sync ? "yes" : "no");
  return os.str();
}

Status Plan::execute(const ExecuteArgs& a) const {
  if (!impl_) return invalid_argument("execute on an empty plan");
  const auto& p = impl_->problem;
  const auto& bp = *impl_->backend_plan;
  const std::size_t align = bp.operand_alignment;
  RAGDOT_RETURN_IF_ERROR(check_buffer("lhs", a.lhs, p.lhs_elements, p.lhs_dtype, bp.memory_space, align));
  RAGDOT_RETURN_IF_ERROR(check_buffer("rhs", a.rhs, p.rhs_elements, p.rhs_dtype, bp.memory_space, align));
  RAGDOT_RETURN_IF_ERROR(check_buffer("group_sizes", a.group_sizes, p.gs_elements, p.gs_dtype, bp.memory_space, 0));
  RAGDOT_RETURN_IF_ERROR(check_buffer("out", a.out, p.out_elements, p.out_buffer_dtype(), bp.memory_space, align));
  if (p.has_group_offset) {
    RAGDOT_RETURN_IF_ERROR(check_buffer("group_offset", a.group_offset, 1, DType::kI32, bp.memory_space, 0));
  }
  // the gathered rows: m in mode 1, the contracting k in mode 2
  const std::int64_t index_rows = p.lhs_gather_rows ? (p.mode == RaggedMode::kContracting ? p.k : p.m) : 0;
  const std::int64_t scatter_rows = p.out_scatter_rows ? p.m : 0;
  if (p.lhs_gather_rows) {
    RAGDOT_RETURN_IF_ERROR(check_buffer("lhs_rows", a.lhs_rows, index_rows, DType::kI32, bp.memory_space, 0));
  }
  if (p.out_scatter_rows) {
    RAGDOT_RETURN_IF_ERROR(check_buffer("out_rows", a.out_rows, scatter_rows, DType::kI32, bp.memory_space, 0));
    RAGDOT_RETURN_IF_ERROR(check_buffer("row_scales", a.row_scales, scatter_rows, DType::kF32, bp.memory_space, 0));
  }
  if (bp.workspace_bytes) {
    if (a.workspace.data == nullptr || a.workspace.bytes < bp.workspace_bytes) {
      return invalid_argument("workspace has " + std::to_string(a.workspace.bytes) + " bytes; the plan needs " +
                              std::to_string(bp.workspace_bytes));
    }
    if (a.workspace.space != bp.memory_space) return invalid_argument("workspace is in the wrong memory space");
    if (reinterpret_cast<std::uintptr_t>(a.workspace.data) % 64 != 0) {
      return invalid_argument("workspace is not aligned to 64 bytes");
    }
  }
  const std::size_t out_bytes = std::size_t(p.out_elements) * dtype_size(p.out_buffer_dtype());
  const ConstBuffer inputs[] = {a.lhs, a.rhs, a.group_sizes, a.group_offset, a.lhs_rows, a.out_rows, a.row_scales};
  const char* names[] = {"lhs", "rhs", "group_sizes", "group_offset", "lhs_rows", "out_rows", "row_scales"};
  const std::size_t in_bytes[] = {std::size_t(p.lhs_elements) * dtype_size(p.lhs_dtype),
                                  std::size_t(p.rhs_elements) * dtype_size(p.rhs_dtype),
                                  std::size_t(p.gs_elements) * dtype_size(p.gs_dtype),
                                  p.has_group_offset ? std::size_t(4) : std::size_t(0),
                                  std::size_t(index_rows) * 4,
                                  std::size_t(scatter_rows) * 4,
                                  std::size_t(scatter_rows) * 4};
  for (int i = 0; i < 7; ++i) {
    if (overlaps(a.out.data, out_bytes, inputs[i].data, in_bytes[i])) {
      return invalid_argument(std::string("out overlaps ") + names[i]);
    }
    if (overlaps(a.workspace.data, bp.workspace_bytes, inputs[i].data, in_bytes[i])) {
      return invalid_argument(std::string("workspace overlaps ") + names[i]);
    }
  }
  if (overlaps(a.workspace.data, bp.workspace_bytes, a.out.data, out_bytes)) {
    return invalid_argument("workspace overlaps out");
  }
  return bp.execute(a);
}

namespace {
// A mode 1 op with a 2-D lhs [M, K] and a row-major out [M, N], nothing to relayout: the form
// whose output rows the SwiGLU and scatter epilogues rewrite.
bool plain_row_major_mode1(const RaggedDot& op, const core::GroupGemmProblem& p) {
  return p.mode == RaggedMode::kNonContracting && op.spec().lhs.rank() == 2 && p.is_single_batch() &&
         !p.needs_relayout() && p.out_n == 1 && p.out_m == p.n;
}

// The options as the backends see them: RAGDOT_PLAN_EFFORT=measure raises the effort (programs
// that cannot pass PlanOptions, such as JAX and PyTorch, ask for measured plans through it).
Result<PlanOptions> effective_options(const PlanOptions& given, const core::GroupGemmProblem& problem) {
  PlanOptions o = given;
  if (auto effort = env::plan_effort()) {
    if (*effort == "measure") o.effort = PlanningEffort::kMeasure;
    else if (*effort != "heuristic")
      return invalid_argument("RAGDOT_PLAN_EFFORT must be heuristic or measure, got '" + *effort + "'");
  }
  const auto& sizes = o.measure_group_sizes;
  if (!sizes.empty()) {
    if (std::int64_t(sizes.size()) != problem.num_groups) {
      return invalid_argument("measure_group_sizes has " + std::to_string(sizes.size()) + " entries; the op has " +
                              std::to_string(problem.num_groups) + " groups");
    }
    std::int64_t sum = 0;
    for (std::int64_t g : sizes) {
      if (g < 0) return invalid_argument("measure_group_sizes: a negative group size " + std::to_string(g));
      if (g > problem.ragged_extent - sum) {  // sum <= extent: compared before adding, it cannot overflow
        return invalid_argument("measure_group_sizes: sum exceeds the ragged dimension's size " +
                                std::to_string(problem.ragged_extent));
      }
      sum += g;
    }
  }
  return o;
}

// A row table's size (lhs_gather_rows, out_scatter_rows) times its row length: rows are indexed
// with int32, and the product must stay within the element limit every tensor has.
Result<std::int64_t> table_elements(const char* option, std::int64_t rows, std::int64_t row_length) {
  if (rows < 0 || rows > std::numeric_limits<std::int32_t>::max()) {
    return invalid_argument(std::string(option) + ": " + std::to_string(rows) +
                            " rows (0 to 2^31 - 1: rows are int32 indices)");
  }
  if (!core::elements_fit({rows, row_length})) {
    return invalid_argument(std::string(option) + ": " + std::to_string(rows) + " rows of " +
                            std::to_string(row_length) + " elements are too many elements");
  }
  return rows * row_length;
}

// A backend's plan allocates on the host (tables, arrays of per-group arguments, measured
// candidates' buffers): a size the host cannot give is the caller's resource_exhausted, never an
// exception through the API.
Result<std::unique_ptr<detail::BackendPlan>> plan_on(const planner::Backend& backend, const planner::PlanRequest& r) {
  try {
    return backend.plan(r);
  } catch (const std::bad_alloc&) {
    return resource_exhausted(std::string(backend.name()) + ": out of host memory while planning");
  } catch (const std::length_error&) {
    return resource_exhausted(std::string(backend.name()) + ": a planning table too large for this host");
  }
}

}  // namespace

Result<Plan> make_plan(const RaggedDot& op, const PlanOptions& given_options) {
  core::GroupGemmProblem problem = core::canonicalize(op);
  RAGDOT_ASSIGN_OR_RETURN(const PlanOptions options, effective_options(given_options, problem));
  std::string wanted = options.backend;
  if (wanted.empty()) {
    if (auto b = env::backend()) wanted = *b;
  }
  if (options.lhs_gather_rows) {
    const std::int64_t rows = *options.lhs_gather_rows;
    // the lhs's rows are contiguous: mode 1's [M, K] (its rows are m), mode 2's [K, M] (the
    // ragged contracting rows are k: the weight gradient of a projection that gathered them)
    const bool mode1 = problem.mode == RaggedMode::kNonContracting, mode2 = problem.mode == RaggedMode::kContracting;
    if (!(mode1 || mode2) || op.spec().lhs.rank() != 2 || !problem.is_single_batch() || problem.lhs_relayout ||
        (mode1 ? problem.lhs_k : problem.lhs_m) != 1) {
      return invalid_argument("lhs_gather_rows: only a mode 1 op with a 2-D lhs [M, K] (K contiguous) or a mode 2 op "
                              "with a 2-D lhs [K, M] (M contiguous) gathers its rows; " + op.to_string() + " is not one");
    }
    RAGDOT_ASSIGN_OR_RETURN(problem.lhs_elements, table_elements("lhs_gather_rows", rows, mode1 ? problem.k : problem.m));
    problem.lhs_gather_rows = rows;
  }
  if (options.swiglu_epilogue) {
    if (!plain_row_major_mode1(op, problem)) {
      return invalid_argument("swiglu_epilogue: only a mode 1 op with a 2-D lhs [M, K] and a row-major out [M, N] "
                              "takes the SwiGLU epilogue; " + op.to_string() + " is not one");
    }
    if (problem.n % 2 != 0) {
      return invalid_argument("swiglu_epilogue: N = " + std::to_string(problem.n) +
                              " is odd; the product's columns are [gate | up] halves");
    }
    if (problem.out_dtype != DType::kBF16 && problem.out_dtype != DType::kF16 && problem.out_dtype != DType::kF32) {
      return invalid_argument("swiglu_epilogue: the output must be a float type, not " +
                              std::string(dtype_name(problem.out_dtype)));
    }
    problem.swiglu_epilogue = true;
    problem.out_m = problem.n / 2;
    problem.out_elements = problem.m * problem.n / 2;
  }
  if (options.out_scatter_rows) {
    const std::int64_t rows = *options.out_scatter_rows;
    if (!plain_row_major_mode1(op, problem)) {
      return invalid_argument("out_scatter_rows: only a mode 1 op with a 2-D lhs [M, K] and a row-major out [M, N] "
                              "adds its rows into a table; " + op.to_string() + " is not one");
    }
    if (options.swiglu_epilogue) return invalid_argument("out_scatter_rows and swiglu_epilogue do not go together");
    RAGDOT_ASSIGN_OR_RETURN(problem.out_elements, table_elements("out_scatter_rows", rows, problem.n));
    problem.out_scatter_rows = rows;
  }
  planner::PlanRequest request{op, problem, options};

  // what the plan must fuse, and which backends can
  struct FusedStep {
    bool asked;
    bool (planner::Backend::*has)() const;
    const char* lacks;
    const char* option;
  };
  const FusedStep fused_steps[] = {
      {problem.lhs_gather_rows.has_value(), &planner::Backend::gathers_lhs_rows, "does not gather lhs rows",
       "lhs_gather_rows"},
      {problem.out_scatter_rows.has_value(), &planner::Backend::scatters_out_rows, "does not add rows into a table",
       "out_scatter_rows"},
      {problem.swiglu_epilogue, &planner::Backend::fuses_swiglu, "has no SwiGLU epilogue", "swiglu_epilogue"}};
  std::string reasons;
  bool found_name = wanted.empty();
  for (const planner::Backend* backend : planner::registry()) {
    if (!wanted.empty() && backend->name() != wanted) continue;
    found_name = true;
    if (options.memory_space && backend->memory_space() != *options.memory_space) {
      // A name may stand for one backend per memory space (padded): the space picks among them.
      if (!wanted.empty()) {
        reasons += "\n  " + std::string(backend->name()) + ": runs on " + memory_space_name(backend->memory_space()) +
                   " memory, not " + memory_space_name(*options.memory_space);
      }
      continue;
    }
    if (wanted.empty() && !backend->automatic()) continue;
    const FusedStep* lacking = std::find_if(std::begin(fused_steps), std::end(fused_steps), [&](const FusedStep& f) {
      return f.asked && !(backend->*f.has)();
    });
    if (lacking != std::end(fused_steps)) {
      if (!wanted.empty()) return unsupported("backend '" + wanted + "' " + lacking->lacks + " (" + lacking->option + ")");
      reasons += "\n  " + std::string(backend->name()) + ": " + lacking->lacks;
      continue;
    }
    if (Status av = backend->available(); !av.is_ok()) {
      reasons += "\n  " + std::string(backend->name()) + ": " + av.message();
      continue;
    }
    auto bp = plan_on(*backend, request);
    if (!bp.ok()) {
      if (!wanted.empty() || bp.status().code() == StatusCode::kInvalidArgument) return bp.status();
      reasons += "\n  " + std::string(backend->name()) + ": " + bp.status().message();
      if (env::debug()) std::fprintf(stderr, "ragdot: %s does not take %s: %s\n", std::string(backend->name()).c_str(),
                                     op.to_string().c_str(), bp.status().message().c_str());
      continue;
    }
    auto impl = std::make_shared<Plan::Impl>(Plan::Impl{op, problem, std::string(backend->name()), std::move(*bp)});
    Plan plan;
    plan.impl_ = std::move(impl);
    if (env::print_plan()) std::fprintf(stderr, "ragdot: %s\n", plan.to_string().c_str());
    return plan;
  }
  if (!found_name) {
    std::string names;
    for (const planner::Backend* b : planner::registry()) names += " " + std::string(b->name());
    return invalid_argument("no backend named '" + wanted + "' (built:" + names + ")");
  }
  if (!wanted.empty()) return unavailable("backend '" + wanted + "' is not available here:" + reasons);
  return unsupported("no backend takes " + op.to_string() + ":" + reasons);
}

std::vector<BackendInfo> list_backends() {
  std::vector<BackendInfo> out;
  for (const planner::Backend* b : planner::registry()) {
    BackendInfo info;
    info.name = std::string(b->name());
    Status av = b->available();
    info.available = av.is_ok();
    info.detail = av.is_ok() ? b->describe() : av.message();
    info.memory_space = b->memory_space();
    info.automatic = b->automatic();
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace ragdot
