// ragdot run: the ragged dots of one MoE layer (up and down) of a model preset, on the best backend
// here, checked on a sample against the float64 reference, beside the capacity-padded baseline.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "backend_measure.hpp"
#include "backend_names.hpp"
#include "command_help.hpp"
#include "commands.hpp"
#include "gemm_metrics.hpp"
#include "host_memory_budget.hpp"
#include "host_rate_probe.hpp"
#include "machine_info.hpp"
#include "moe_case.hpp"
#include "operand_set.hpp"
#include "preset_options.hpp"
#include "progress.hpp"
#include "sample_check.hpp"
#include "text_table.hpp"
#include "usage_error.hpp"
#include "value_parsers.hpp"

namespace ragdot::cli {

namespace {

struct RunSettings {
  workloads::MoePreset preset;
  std::optional<std::int64_t> tokens;
  double skew = 0.0;
  DType dtype = DType::kBF16;
  std::string backend;  // "" = automatic
  std::int64_t shrink = 0;  // 0 = automatic
  std::uint64_t seed = 1;
  int reps = 0;  // 0 = the default of the backend's side
  bool baseline = true;
  bool quiet = false;
};

std::string backend_names_text() {
  std::string s;
  for (const auto& b : list_backends()) s += (s.empty() ? "" : ", ") + b.name;
  return s;
}

CommandHelp run_help() {
  CommandHelp h;
  h.name = "run";
  h.synopsis = "[--model PRESET] [--tokens N] [--skew S] [--dtype D] [--backend B]";
  h.description =
      "Runs the two ragged dots of one Mixture-of-Experts layer of a model preset, the up projection\n"
      "(gate and up fused, [tokens*top_k, hidden] x [experts, hidden, 2*ffn]) and the down projection\n"
      "([tokens*top_k, ffn] x [experts, ffn, hidden]), with group sizes from a seeded router. It uses\n"
      "the best backend present (a GPU when there is one), checks a sample of each output against the\n"
      "float64 reference, and prints time, TFLOP/s, GB/s and the speedup over the capacity-padded\n"
      "baseline. Without a GPU it runs on the CPU at a size that finishes in seconds. Progress goes to\n"
      "stderr; the exit status is 1 when a check fails.\n";
  h.options = {
      {"model", "PRESET", "model preset (default " + std::string(kDefaultModel) + "):\n" + preset_names()},
      {"tokens", "N", "tokens in the batch (default 4096 on a GPU; on the CPU, as many as take\nabout 0.1 s per GEMM at the speed a short probe measures first)"},
      {"skew", "S", "router skew: 0 = uniform (default); 1.2 = Zipf-like, as real traffic"},
      {"dtype", "D", "operand type: bf16 (default), f16 or f32; the output has the same type"},
      {"backend", "B", "auto (default: RAGDOT_BACKEND, else the first available of the registry)\nor one of: " +
                           backend_names_text()},
      {"shrink", "F", "divide the model's hidden and expert ffn sizes by F (default 1, or on the\nCPU what keeps the weights within a quarter of the free memory)"},
      {"seed", "N", "seed of the router and of the operand values (default 1)"},
      {"reps", "N", "timed repetitions, the median is reported (default 3 on the CPU, 10 on a GPU)"},
      {"no-baseline", "", "do not run the padded baseline"},
      {"quiet", "", "no progress on stderr"},
  };
  h.examples =
      "  ragdot run\n"
      "  ragdot run --model deepseek-v3 --skew 1.2\n"
      "  ragdot run --model qwen3-30b-a3b --tokens 256 --dtype f32 --backend cpu\n";
  return h;
}

RunSettings parse_settings(const ParsedOptions& o) {
  RunSettings s;
  s.preset = parse_preset(o.get("model").value_or(kDefaultModel), "model");
  if (auto t = o.get("tokens")) s.tokens = parse_integer(*t, "tokens", 1, 1 << 20);
  if (auto v = o.get("skew")) s.skew = parse_real(*v, "skew", 0.0, 10.0);
  if (auto v = o.get("dtype")) s.dtype = parse_operand_dtype(*v, "dtype");
  s.backend = parse_backend_name(o.get("backend").value_or("auto"), "backend", true);
  if (auto v = o.get("shrink")) s.shrink = parse_integer(*v, "shrink", 1, 1024);
  if (auto v = o.get("seed")) s.seed = parse_seed(*v, "seed");
  if (auto v = o.get("reps")) s.reps = int(parse_integer(*v, "reps", 1, 1000));
  s.baseline = !o.has("no-baseline");
  s.quiet = o.has("quiet");
  return s;
}

// One GEMM of the layer: the backend's measurement, its check and the baseline's measurement.
struct GemmOutcome {
  MoeGemmCase gemm;
  std::optional<BackendMeasurement> measured;
  std::optional<SampleCheck> check;
  std::optional<BackendMeasurement> baseline;
  std::string error;           // the backend failed: no measurement
  std::string baseline_error;  // the baseline failed: a warning only
};

double operand_bytes(const MoeGemmCase& g) {
  return double(dtype_size(g.dtype)) * (double(g.m) * double(g.k) + double(g.groups) * double(g.k) * double(g.n));
}

GemmOutcome run_gemm(const MoeGemmCase& gemm, std::uint64_t data_seed, const RunSettings& s, Progress& progress) {
  GemmOutcome r{gemm, {}, {}, {}, {}, {}};
  progress.begin(gemm.title() + format(" [M=%lld K=%lld N=%lld, %lld experts]: ", (long long)gemm.m,
                                       (long long)gemm.k, (long long)gemm.n, (long long)gemm.groups) +
                 (s.backend.empty() ? "auto" : s.backend));
  std::unique_ptr<OperandSet> operands;
  if (Status st = ensure_host_memory(operand_bytes(gemm), "the operands of " + gemm.title()); !st.is_ok()) {
    r.error = st.to_string();
  } else if (auto made = OperandSet::create(gemm.m * gemm.k, gemm.groups * gemm.k * gemm.n, gemm.dtype,
                                             gemm.group_sizes, data_seed);
             !made.ok()) {
    r.error = made.status().to_string();
  } else {
    operands = std::move(*made);
  }
  if (operands) {
    MeasureRequest request = default_measure_request(s.backend, s.reps);
    request.keep_output = true;
    auto m = measure_backend(gemm, *operands, request);
    if (!m.ok()) {
      r.error = m.status().to_string();
    } else {
      r.check = check_sample(gemm, *operands, m->output, m->out_dtype);
      m->output = {};  // the check has read it; a real layer's output is large
      r.measured = std::move(*m);
    }
  }
  if (!r.error.empty()) {
    progress.fail(r.error);
  } else {
    progress.done(r.measured->backend + " " + format_duration(r.measured->timing.median_seconds) + ", check " +
                  (r.check->passed ? "passed" : "FAILED"));
  }

  if (!s.baseline || !operands || (r.measured && r.measured->backend == "padded")) return r;
  progress.begin(gemm.title() + ": padded baseline");
  MeasureRequest baseline = default_measure_request("padded", s.reps);
  // beside a GPU backend the baseline runs on the GPU too
  if (r.measured && r.measured->space == MemorySpace::kDevice) baseline.memory_space = MemorySpace::kDevice;
  auto b = measure_backend(gemm, *operands, baseline);
  if (!b.ok()) {
    r.baseline_error = b.status().to_string();
    progress.fail("baseline: " + r.baseline_error);
  } else {
    r.baseline = std::move(*b);
    progress.done(format_duration(r.baseline->timing.median_seconds));
  }
  return r;
}

void print_report(const RunSettings& s, const std::vector<GemmOutcome>& outcomes, const SizeDefaults& sizes,
                  double host_rate) {
  const MoeGemmCase& first = outcomes.front().gemm;
  const workloads::MoePreset p = shrunk_preset(s.preset, sizes.shrink);
  std::printf("ragdot run: %s, %lld token%s, top-%lld of %lld experts, skew %g, %s\n", s.preset.name.c_str(),
              (long long)first.tokens, first.tokens == 1 ? "" : "s", (long long)p.top_k, (long long)p.experts, s.skew,
              dtype_name(s.dtype).data());
  std::printf("layer: hidden %lld, expert ffn %lld%s\n", (long long)p.hidden, (long long)p.expert_ffn,
              sizes.shrink > 1 ? format(" (the model's sizes divided by %lld)", (long long)sizes.shrink).c_str() : "");
  std::printf("machine: %s\n\n", machine_description().c_str());

  TextTable t;
  t.add_column("gemm");
  for (const char* h : {"M", "K", "N"}) t.add_column(h, TextTable::Align::kRight);
  t.add_column("experts", TextTable::Align::kRight);
  t.add_column("backend");
  for (const char* h : {"time", "TFLOP/s", "GB/s", "padded", "speedup"}) t.add_column(h, TextTable::Align::kRight);
  t.add_column("check");
  for (const auto& o : outcomes) {
    const MoeGemmCase& g = o.gemm;
    std::vector<std::string> row = {g.gemm, std::to_string(g.m), std::to_string(g.k), std::to_string(g.n),
                                    format("%lld/%lld", (long long)g.active_groups(), (long long)g.groups)};
    if (!o.measured) {
      row.insert(row.end(), {s.backend.empty() ? "auto" : s.backend, "-", "-", "-", "-", "-", "error"});
    } else {
      const double sec = o.measured->timing.median_seconds;
      row.push_back(o.measured->backend);
      row.push_back(format_duration(sec));
      row.push_back(format_rate(useful_tflops(g, sec)));
      row.push_back(format_rate(min_bytes_gbps(g, o.measured->out_dtype, sec)));
      if (o.baseline) {
        row.push_back(format_duration(o.baseline->timing.median_seconds));
        row.push_back(format_speedup(o.baseline->timing.median_seconds / sec));
      } else {
        row.insert(row.end(), {"-", "-"});
      }
      row.push_back(o.check->passed ? "passed" : "FAILED");
    }
    t.add_row(std::move(row));
  }
  std::fputs(t.render().c_str(), stdout);

  std::printf("\nTFLOP/s counts useful work (2*rows*K*N); GB/s counts the bytes a perfect kernel moves\n"
              "(inputs, the weights of experts with rows, output). speedup = padded time / time.\n");
  for (const auto& o : outcomes) {
    if (o.measured) std::printf("%-5s %s\n", o.gemm.gemm.c_str(), o.measured->plan_line.c_str());
    if (o.baseline) std::printf("%-5s %s\n", o.gemm.gemm.c_str(), o.baseline->plan_line.c_str());
  }
  for (const auto& o : outcomes) {
    if (o.measured && o.baseline && o.measured->space != o.baseline->space) {
      std::printf("the padded baseline runs in %s memory (on the CPU kernels): the speedup compares %s with it there\n",
                  memory_space_name(o.baseline->space), o.measured->backend.c_str());
      break;
    }
  }
  for (const auto& o : outcomes) {
    if (o.check) std::printf("check %s: %s\n", o.gemm.gemm.c_str(), o.check->summary().c_str());
    if (!o.error.empty()) std::printf("error %s: %s\n", o.gemm.gemm.c_str(), o.error.c_str());
    if (!o.baseline_error.empty()) {
      std::printf("baseline %s not measured: %s\n", o.gemm.gemm.c_str(), o.baseline_error.c_str());
    }
  }
  if (std::isfinite(host_rate) && host_rate > 0) {
    std::printf("(sized for about %.1f s per GEMM at the %s GFLOP/s measured here; --tokens and --shrink set the size)\n",
                kHostSecondsPerGemm, format_rate(host_rate / 1e9).c_str());
  }
}

}  // namespace

int command_run(const std::vector<std::string>& args) {
  const CommandHelp help = run_help();
  const ParsedOptions options = parse_options("run", help.options, args);
  if (options.help_requested()) {
    std::fputs(render_help(help).c_str(), stdout);
    return kExitOk;
  }
  RunSettings s = parse_settings(options);
  if (Status st = require_available(s.backend); !st.is_ok()) {
    std::fprintf(stderr, "ragdot run: %s\n", st.to_string().c_str());
    return kExitFailure;
  }

  const MemorySpace space = expected_memory_space(s.backend);
  // On the CPU the default size follows the measured speed; given --tokens, only memory limits it.
  double host_rate = std::numeric_limits<double>::infinity();
  if (space == MemorySpace::kHost && !s.tokens) {
    auto rate = measure_host_flop_rate(s.backend, s.dtype);
    host_rate = rate.ok() ? *rate : 0.0;  // a backend that fails here fails below, with its message
  }
  SizeDefaults sizes = default_sizes(s.preset, s.dtype, space, available_host_memory_bytes(), s.shrink, host_rate);
  if (s.tokens) sizes.tokens = *s.tokens;
  const std::vector<MoeGemmCase> gemms = layer_cases(s.preset, sizes.tokens, s.skew, s.seed, s.dtype, sizes.shrink);

  // The padded backend is its own baseline.
  std::string chosen = s.backend;
  if (chosen.empty()) {
    if (const char* env = std::getenv("RAGDOT_BACKEND"); env != nullptr) chosen = env;
  }
  if (chosen == "padded") s.baseline = false;

  Progress progress(int(gemms.size()) * (s.baseline ? 2 : 1), s.quiet);
  std::vector<GemmOutcome> outcomes;
  for (std::size_t i = 0; i < gemms.size(); ++i) outcomes.push_back(run_gemm(gemms[i], s.seed * 16 + i, s, progress));
  print_report(s, outcomes, sizes, host_rate);

  bool ok = true;
  for (const auto& o : outcomes) ok = ok && o.measured && o.check && o.check->passed;
  return ok ? kExitOk : kExitFailure;
}

}  // namespace ragdot::cli
