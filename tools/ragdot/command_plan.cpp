// ragdot plan: describe a ragged dot from flags (or a preset's layer GEMM) and print the op and the
// one-line plan a backend makes for it: backend, variant, workspace, graph safety, host sync.
#include <cstdio>

#include "backend_names.hpp"
#include "command_help.hpp"
#include "commands.hpp"
#include "moe_case.hpp"
#include "op_request.hpp"
#include "preset_options.hpp"
#include "text_table.hpp"
#include "usage_error.hpp"
#include "value_parsers.hpp"

namespace ragdot::cli {

namespace {

constexpr std::int64_t kMaxDim = std::int64_t(1) << 31;

CommandHelp plan_help() {
  CommandHelp h;
  h.name = "plan";
  h.synopsis = "(--m M --k K --n N | --model PRESET [--gemm up|down] [--tokens N]) [--mode 1|2|3] [options]";
  h.description =
      "Describes one ragged dot and prints it with the plan a backend makes for it, in one line:\n"
      "backend, variant, canonical problem, dtypes, workspace, memory, CUDA-graph safety and whether\n"
      "execute syncs with the host. Nothing is executed. The op takes the plain form of its mode:\n"
      "  mode 1 (forward):       lhs [m,k] x rhs [g,k,n] -> [m,n], the groups split m\n"
      "  mode 2 (weight grad):   lhs [k,m] x rhs [k,n] -> [g,m,n], the groups split k\n"
      "  mode 3 (ragged batch):  lhs [b,m,k] x rhs [b,k,n] -> [b,m,n], the groups split b\n"
      "RAGDOT_PRINT_PLAN=1 also makes the library print each plan on stderr as it is made.\n";
  h.options = {
      {"mode", "M", "1 (default), 2 or 3"},
      {"m", "M", "rows of the output"},
      {"k", "K", "contraction length"},
      {"n", "N", "columns of the output"},
      {"groups", "G", "number of groups (experts; default 8)"},
      {"batch", "B", "mode 3: the batch the groups split (default: the number of groups)"},
      {"model", "PRESET", "take m, k, n and groups from a preset's layer GEMM (mode 1):\n" + preset_names()},
      {"gemm", "G", "with --model: up (default) or down"},
      {"tokens", "N", "with --model: tokens in the batch (default 4096)"},
      {"dtype", "D", "operand type: bf16 (default), f16 or f32"},
      {"out-dtype", "D", "output type (default: the operands' type)"},
      {"group-sizes-dtype", "D", "i32 (default) or i64"},
      {"local-groups", "L", "compute only L groups from an execute-time offset (expert parallelism)"},
      {"backend", "B", "auto (default), all (a plan per backend), or a backend name"},
      {"effort", "E", "heuristic (default) or measure (time candidate variants)"},
      {"checked", "", "device backends verify group sizes at execute time"},
      {"threads", "N", "threads of the CPU backends (default RAGDOT_NUM_THREADS or all)"},
      {"padded-capacity-factor", "F", "padded backend: capacity = ceil(F * rows / groups), dropping rows beyond"},
      {"padded-max-group-rows", "N", "padded backend: the largest group the workspace is sized for"},
  };
  h.examples =
      "  ragdot plan --m 8192 --k 4096 --n 28672 --groups 8\n"
      "  ragdot plan --model deepseek-v3 --gemm down --backend all\n"
      "  ragdot plan --mode 2 --m 4096 --k 16384 --n 14336 --groups 8 --dtype f32\n";
  return h;
}

DType parse_group_sizes_dtype(std::string_view text) {
  const auto dt = parse_dtype(text);
  if (!dt || !(*dt == DType::kI32 || *dt == DType::kI64)) {
    throw UsageError("invalid value '" + std::string(text) + "' for --group-sizes-dtype: expected i32 or i64");
  }
  return *dt;
}

OpRequest parse_op_request(const ParsedOptions& o) {
  OpRequest r;
  if (auto v = o.get("mode")) r.mode = parse_mode(*v, "mode");
  if (auto v = o.get("dtype")) r.dtype = parse_operand_dtype(*v, "dtype");
  if (auto v = o.get("out-dtype")) r.out_dtype = parse_operand_dtype(*v, "out-dtype");
  if (auto v = o.get("group-sizes-dtype")) r.group_sizes_dtype = parse_group_sizes_dtype(*v);
  if (auto v = o.get("local-groups")) r.local_groups = parse_integer(*v, "local-groups", 0, kMaxDim);

  const bool sized = o.has("m") || o.has("k") || o.has("n");
  if (o.has("model")) {
    if (sized || o.has("groups")) throw UsageError("--model sets m, k, n and groups: give either --model or the sizes");
    if (r.mode != 1) throw UsageError("--model describes the layer's forward GEMMs: mode 1");
    const auto preset = parse_preset(*o.get("model"), "model");
    const std::string gemm = o.get("gemm").value_or("up");
    if (gemm != "up" && gemm != "down") throw UsageError("invalid value '" + gemm + "' for --gemm: expected up or down");
    const std::int64_t tokens = o.has("tokens") ? parse_integer(*o.get("tokens"), "tokens", 1, 1 << 24) : 4096;
    for (const auto& g : workloads::layer_gemms(preset, tokens)) {
      if (g.name != gemm) continue;
      r.m = g.m;
      r.k = g.k;
      r.n = g.n;
      r.groups = g.groups;
    }
    return r;
  }
  if (o.has("gemm") || o.has("tokens")) throw UsageError("--gemm and --tokens go with --model");
  if (!(o.has("m") && o.has("k") && o.has("n"))) {
    throw UsageError("give the sizes --m, --k and --n, or a --model preset (see 'ragdot plan --help')");
  }
  r.m = parse_integer(*o.get("m"), "m", 0, kMaxDim);
  r.k = parse_integer(*o.get("k"), "k", 0, kMaxDim);
  r.n = parse_integer(*o.get("n"), "n", 0, kMaxDim);
  r.groups = o.has("groups") ? parse_integer(*o.get("groups"), "groups", 0, 1 << 24) : 8;
  r.batch = o.has("batch") ? parse_integer(*o.get("batch"), "batch", 0, kMaxDim) : r.groups;
  if (o.has("batch") && r.mode != 3) throw UsageError("--batch is for mode 3 (ragged batch)");
  return r;
}

PlanOptions parse_plan_options(const ParsedOptions& o) {
  PlanOptions p;
  if (auto v = o.get("effort")) {
    if (*v == "heuristic") p.effort = PlanningEffort::kHeuristic;
    else if (*v == "measure") p.effort = PlanningEffort::kMeasure;
    else throw UsageError("invalid value '" + *v + "' for --effort: expected heuristic or measure");
  }
  p.checked = o.has("checked");
  if (auto v = o.get("threads")) p.num_threads = int(parse_integer(*v, "threads", 1, 4096));
  if (auto v = o.get("padded-capacity-factor")) p.padded_capacity_factor = parse_real(*v, "padded-capacity-factor", 1e-6, 1e6);
  if (auto v = o.get("padded-max-group-rows")) {
    p.padded_max_group_rows = parse_integer(*v, "padded-max-group-rows", 0, kMaxDim);
  }
  return p;
}

}  // namespace

int command_plan(const std::vector<std::string>& args) {
  const CommandHelp help = plan_help();
  const ParsedOptions o = parse_options("plan", help.options, args);
  if (o.help_requested()) {
    std::fputs(render_help(help).c_str(), stdout);
    return kExitOk;
  }
  const OpRequest request = parse_op_request(o);
  PlanOptions options = parse_plan_options(o);
  const std::string backend_text = o.get("backend").value_or("auto");
  const bool every_backend = backend_text == "all";
  if (!every_backend) options.backend = parse_backend_name(backend_text, "backend", true);

  // The sizes came from the command line, so an op JAX would reject is a usage error.
  auto op = make_op(request);
  if (!op.ok()) throw UsageError("the op is invalid: " + op.status().message());
  std::printf("op    %s\n", op->to_string().c_str());

  if (!every_backend) {
    auto plan = make_plan(*op, options);
    if (!plan.ok()) {
      std::fflush(stdout);
      std::fprintf(stderr, "ragdot plan: %s\n", plan.status().to_string().c_str());
      return kExitFailure;
    }
    std::printf("%s\n", plan->to_string().c_str());
    return kExitOk;
  }

  int planned = 0;
  for (const auto& b : list_backends()) {
    PlanOptions per_backend = options;
    per_backend.backend = b.name;
    if (!b.available) {
      std::printf("%-8s not available: %s\n", b.name.c_str(), b.detail.c_str());
      continue;
    }
    auto plan = make_plan(*op, per_backend);
    if (plan.ok()) {
      ++planned;
      std::printf("%-8s %s\n", b.name.c_str(), plan->to_string().c_str());
    } else {
      std::printf("%-8s declines: %s\n", b.name.c_str(), plan.status().to_string().c_str());
    }
  }
  return planned > 0 ? kExitOk : kExitFailure;
}

}  // namespace ragdot::cli
