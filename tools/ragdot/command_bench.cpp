// ragdot bench: backends side by side on the model presets' layer GEMMs, uniform and skewed
// routing, with JSON records and a PNG bar chart on request.
#include <algorithm>
#include <cstdio>
#include <limits>

#include "backend_measure.hpp"
#include "backend_names.hpp"
#include "bench_report.hpp"
#include "command_help.hpp"
#include "commands.hpp"
#include "gemm_metrics.hpp"
#include "host_memory_budget.hpp"
#include "host_rate_probe.hpp"
#include "machine_info.hpp"
#include "operand_set.hpp"
#include "output_files.hpp"
#include "png_encoder.hpp"
#include "preset_options.hpp"
#include "progress.hpp"
#include "text_table.hpp"
#include "usage_error.hpp"
#include "value_parsers.hpp"

namespace ragdot::cli {

namespace {

struct BenchSettings {
  std::vector<std::string> backends;
  std::vector<workloads::MoePreset> models;
  std::vector<double> skews = {0.0, 1.2};
  std::vector<std::string> gemms = {"up", "down"};
  std::optional<std::int64_t> tokens;
  std::int64_t shrink = 0;  // 0 = automatic
  DType dtype = DType::kBF16;
  std::uint64_t seed = 1;
  int reps = 0;
  bool check = true;
  bool quiet = false;
  std::optional<std::string> json_path, plot_path;
};

CommandHelp bench_help() {
  CommandHelp h;
  h.name = "bench";
  h.synopsis = "[--backends LIST] [--model LIST|all] [--skews LIST] [--json FILE] [--plot FILE.png]";
  h.description =
      "Measures backends side by side on the up and down GEMMs of each model preset's MoE layer, with\n"
      "uniform and skewed routing. Every backend reads the same operands; each output is checked on a\n"
      "sample against the float64 reference. Sizes follow the slowest side: when any listed backend\n"
      "runs on the CPU, each preset gets the CPU size of 'ragdot run' (seconds per case); when all run\n"
      "on a GPU, 4096 tokens at full size. --tokens and --shrink set them. The table shows time and\n"
      "TFLOP/s per backend and, with padded among them, each backend's speedup over it.\n";
  h.options = {
      {"backends", "LIST", "comma-separated backends (default: every available one but cpu_ref)"},
      {"model", "LIST", "presets, or all (default): " + preset_names()},
      {"skews", "LIST", "router skews (default 0,1.2)"},
      {"gemms", "LIST", "up, down or both (default up,down)"},
      {"tokens", "N", "tokens per batch (default: as 'ragdot run' picks for the slowest backend)"},
      {"shrink", "F", "divide hidden and expert ffn sizes by F"},
      {"dtype", "D", "operand type: bf16 (default), f16 or f32"},
      {"seed", "N", "seed of the router and the operands (default 1)"},
      {"reps", "N", "timed repetitions per measurement (default 3 on the CPU, 10 on a GPU)"},
      {"json", "FILE", "write every measurement as JSON"},
      {"plot", "FILE", "draw TFLOP/s as a PNG bar chart"},
      {"no-check", "", "skip the sample check of each output"},
      {"quiet", "", "no progress on stderr"},
  };
  h.examples =
      "  ragdot bench --backends cpu,padded --model qwen3-30b-a3b --plot bench.png\n"
      "  ragdot bench --backends cuda,padded --json results.json\n";
  return h;
}

std::vector<std::string> default_backends() {
  std::vector<std::string> out;
  for (const auto& b : list_backends()) {
    // a name registered for host and device (padded) is listed once
    if (b.available && b.name != "cpu_ref" && std::find(out.begin(), out.end(), b.name) == out.end())
      out.push_back(b.name);
  }
  return out;
}

BenchSettings parse_settings(const ParsedOptions& o) {
  BenchSettings s;
  if (auto v = o.get("backends")) {
    for (const auto& name : split_list(*v, "backends")) {
      const std::string b = parse_backend_name(name, "backends", false);
      if (std::find(s.backends.begin(), s.backends.end(), b) == s.backends.end()) s.backends.push_back(b);
    }
  } else {
    s.backends = default_backends();
  }
  s.models = parse_preset_list(o.get("model").value_or("all"), "model");
  if (auto v = o.get("skews")) s.skews = parse_real_list(*v, "skews", 0.0, 10.0);
  if (auto v = o.get("gemms")) {
    s.gemms = split_list(*v, "gemms");
    for (const auto& g : s.gemms) {
      if (g != "up" && g != "down") throw UsageError("invalid value '" + *v + "' for --gemms: expected up, down or up,down");
    }
  }
  if (auto v = o.get("tokens")) s.tokens = parse_integer(*v, "tokens", 1, 1 << 20);
  if (auto v = o.get("shrink")) s.shrink = parse_integer(*v, "shrink", 1, 1024);
  if (auto v = o.get("dtype")) s.dtype = parse_operand_dtype(*v, "dtype");
  if (auto v = o.get("seed")) s.seed = parse_seed(*v, "seed");
  if (auto v = o.get("reps")) s.reps = int(parse_integer(*v, "reps", 1, 1000));
  if (auto v = o.get("json")) {
    if (v->empty()) throw UsageError("--json needs a file name");
    s.json_path = *v;
  }
  if (auto v = o.get("plot")) {
    if (v->empty()) throw UsageError("--plot needs a file name");
    s.plot_path = *v;
  }
  s.check = !o.has("no-check");
  s.quiet = o.has("quiet");
  return s;
}

// Where `b` runs in this comparison (padded beside GPU backends runs on the GPU).
MemorySpace space_of(const std::string& b, const std::vector<std::string>& backends) {
  return space_in_comparison(b, backends).value_or(expected_memory_space(b));
}

// Host sizes unless every backend runs on the device: the slowest backend must finish too.
MemorySpace sizing_space(const std::vector<std::string>& backends) {
  for (const auto& b : backends) {
    if (space_of(b, backends) == MemorySpace::kHost) return MemorySpace::kHost;
  }
  return MemorySpace::kDevice;
}

// The default sizes must suit the slowest host backend of the comparison.
double slowest_host_rate(const std::vector<std::string>& backends, DType dtype) {
  double slowest = std::numeric_limits<double>::infinity();
  for (const auto& b : backends) {
    if (space_of(b, backends) != MemorySpace::kHost) continue;
    auto rate = measure_host_flop_rate(b, dtype);
    if (rate.ok()) slowest = std::min(slowest, *rate);
  }
  return slowest;
}

void measure_case(BenchResults& results, std::size_t case_index, const BenchSettings& s, Progress& progress) {
  const MoeGemmCase& c = results.cases[case_index];
  std::unique_ptr<OperandSet> operands;
  std::string setup_error;
  const double operand_bytes =
      double(dtype_size(c.dtype)) * (double(c.m) * double(c.k) + double(c.groups) * double(c.k) * double(c.n));
  if (Status st = ensure_host_memory(operand_bytes, "the operands of " + c.title()); !st.is_ok()) {
    setup_error = st.to_string();
  } else if (auto made = OperandSet::create(c.m * c.k, c.groups * c.k * c.n, c.dtype, c.group_sizes,
                                             s.seed * 1024 + case_index);
             !made.ok()) {
    setup_error = made.status().to_string();
  } else {
    operands = std::move(*made);
  }
  for (const auto& backend : s.backends) {
    BenchRecord rec;
    rec.case_index = case_index;
    rec.backend = backend;
    progress.begin(c.title() + format(" skew %g: ", c.skew) + backend);
    if (!operands) {
      rec.error = setup_error;
    } else {
      MeasureRequest request = default_measure_request(backend, s.reps);
      request.keep_output = s.check;
      request.memory_space = space_in_comparison(backend, s.backends);
      auto m = measure_backend(c, *operands, request);
      if (!m.ok()) {
        rec.error = m.status().to_string();
      } else {
        if (s.check) rec.check = check_sample(c, *operands, m->output, m->out_dtype);
        m->output = {};
        rec.measured = std::move(*m);
      }
    }
    if (rec.measured) {
      const double sec = rec.measured->timing.median_seconds;
      progress.done(format_duration(sec) + ", " + format_rate(useful_tflops(c, sec)) + " TFLOP/s" +
                    (rec.check && !rec.check->passed ? ", check FAILED" : ""));
    } else {
      progress.fail(rec.error);
    }
    results.records.push_back(std::move(rec));
  }
}

void print_table(const BenchResults& r) {
  const bool has_padded = std::find(r.backends.begin(), r.backends.end(), "padded") != r.backends.end();
  TextTable t;
  t.add_column("case");
  t.add_column("skew", TextTable::Align::kRight);
  for (const char* h : {"M", "K", "N", "experts"}) t.add_column(h, TextTable::Align::kRight);
  for (const auto& b : r.backends) {
    t.add_column(b + " time", TextTable::Align::kRight);
    t.add_column(b + " TFLOP/s", TextTable::Align::kRight);
  }
  if (has_padded) {
    for (const auto& b : r.backends) {
      if (b != "padded") t.add_column(b + " vs padded", TextTable::Align::kRight);
    }
  }
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const MoeGemmCase& c = r.cases[i];
    std::vector<std::string> row = {c.title(), format("%g", c.skew), std::to_string(c.m), std::to_string(c.k),
                                    std::to_string(c.n),
                                    format("%lld/%lld", (long long)c.active_groups(), (long long)c.groups)};
    for (const auto& b : r.backends) {
      const BenchRecord* rec = r.find(i, b);
      if (rec && rec->measured) {
        const double sec = rec->measured->timing.median_seconds;
        const bool bad = rec->check && !rec->check->passed;
        row.push_back(format_duration(sec));
        row.push_back(format_rate(useful_tflops(c, sec)) + (bad ? " (check FAILED)" : ""));
      } else {
        row.insert(row.end(), {"error", "-"});
      }
    }
    if (has_padded) {
      const BenchRecord* base = r.find(i, "padded");
      for (const auto& b : r.backends) {
        if (b == "padded") continue;
        const BenchRecord* rec = r.find(i, b);
        const bool both = rec && rec->measured && base && base->measured;
        row.push_back(both ? format_speedup(base->measured->timing.median_seconds / rec->measured->timing.median_seconds)
                           : "-");
      }
    }
    t.add_row(std::move(row));
  }
  std::fputs(t.render().c_str(), stdout);
}

}  // namespace

int command_bench(const std::vector<std::string>& args) {
  const CommandHelp help = bench_help();
  const ParsedOptions o = parse_options("bench", help.options, args);
  if (o.help_requested()) {
    std::fputs(render_help(help).c_str(), stdout);
    return kExitOk;
  }
  const BenchSettings s = parse_settings(o);
  for (const auto& b : s.backends) {
    if (Status st = require_available(b); !st.is_ok()) {
      std::fprintf(stderr, "ragdot bench: %s\n", st.message().c_str());
      return kExitFailure;
    }
  }
  for (const auto& path : {s.json_path, s.plot_path}) {
    if (!path) continue;
    if (Status st = ensure_writable(*path); !st.is_ok()) {
      std::fprintf(stderr, "ragdot bench: %s\n", st.message().c_str());
      return kExitFailure;
    }
  }
  if (s.backends.empty()) {
    std::fprintf(stderr, "ragdot bench: no backend to measure\n");
    return kExitFailure;
  }

  BenchResults results;
  results.dtype = s.dtype;
  results.seed = s.seed;
  results.backends = s.backends;
  const MemorySpace space = sizing_space(s.backends);
  const double host_rate = s.tokens ? std::numeric_limits<double>::infinity() : slowest_host_rate(s.backends, s.dtype);
  for (const auto& preset : s.models) {
    SizeDefaults sizes = default_sizes(preset, s.dtype, space, available_host_memory_bytes(), s.shrink, host_rate);
    if (s.tokens) sizes.tokens = *s.tokens;
    for (double skew : s.skews) {
      for (auto& c : layer_cases(preset, sizes.tokens, skew, s.seed, s.dtype, sizes.shrink)) {
        if (std::find(s.gemms.begin(), s.gemms.end(), c.gemm) != s.gemms.end()) results.cases.push_back(std::move(c));
      }
    }
  }

  Progress progress(int(results.cases.size() * s.backends.size()), s.quiet);
  for (std::size_t i = 0; i < results.cases.size(); ++i) measure_case(results, i, s, progress);

  std::printf("ragdot bench: %s, seed %llu\nmachine: %s\n\n", dtype_name(s.dtype).data(), (unsigned long long)s.seed,
              machine_description().c_str());
  print_table(results);
  std::printf("\nTFLOP/s counts useful work (2*rows*K*N); 'vs padded' = padded time / backend time.\n");

  bool ok = true;
  for (const auto& rec : results.records) {
    if (!rec.error.empty()) {
      std::printf("error %s, %s: %s\n", results.cases[rec.case_index].title().c_str(), rec.backend.c_str(),
                  rec.error.c_str());
      ok = false;
    }
    if (rec.check && !rec.check->passed) {
      std::printf("check %s, %s: %s\n", results.cases[rec.case_index].title().c_str(), rec.backend.c_str(),
                  rec.check->summary().c_str());
      ok = false;
    }
  }
  if (s.json_path) {
    if (Status st = write_text_file(*s.json_path, bench_json(results)); !st.is_ok()) {
      std::fprintf(stderr, "ragdot bench: %s\n", st.message().c_str());
      ok = false;
    } else {
      std::printf("wrote %s\n", s.json_path->c_str());
    }
  }
  if (s.plot_path) {
    const RasterCanvas canvas = render_bar_chart(bench_chart(results));
    const auto png = encode_png_rgb(canvas.width(), canvas.height(), canvas.pixels());
    if (Status st = write_binary_file(*s.plot_path, png); !st.is_ok()) {
      std::fprintf(stderr, "ragdot bench: %s\n", st.message().c_str());
      ok = false;
    } else {
      std::printf("wrote %s (%dx%d)\n", s.plot_path->c_str(), canvas.width(), canvas.height());
    }
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace ragdot::cli
