// ragdot verify: every case of the verification matrix on each backend, against the float64
// reference, with the output poisoned first (verify/check.hpp), and a pass/fail summary.
#include <algorithm>
#include <cstdio>
#include <map>

#include "backend_names.hpp"
#include "command_help.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "text_table.hpp"
#include "usage_error.hpp"
#include "value_parsers.hpp"
#include "verify/check.hpp"
#include "verify_matrix.hpp"

namespace ragdot::cli {

namespace {

constexpr int kFailuresShown = 20;

struct BackendTally {
  BackendInfo backend;
  int passed = 0, failed = 0, unsupported = 0;
  double worst_error_ratio = 0.0;  // rel_error / tolerance of the worst passing or failing case
  std::string not_run;             // why the backend was not verified at all
  std::vector<std::string> failures;
  std::map<std::string, int> unsupported_reasons;
};

CommandHelp verify_help() {
  CommandHelp h;
  h.name = "verify";
  h.synopsis = "[--backend B|all] [--cases N] [--seed S] [--mode M] [--dtype D] [--quick]";
  h.description =
      "Checks backends against the float64 reference (the cpu_ref oracle's arithmetic) on seeded random\n"
      "ragged dots of all three modes (batch dimensions, several m/k/n dimensions, permuted axes, group\n"
      "offsets) and on a grid of the plain MoE forms for every mode, dtype and group-size pattern (empty\n"
      "groups, all rows in one group, sizes that sum short of the extent, ...). Each case gets fresh\n"
      "random inputs and an output filled with NaN first, so that an element a backend never writes\n"
      "fails. Ops a backend does not take are counted as unsupported, not as failures.\n";
  h.options = {
      {"backend", "B", "a backend name, or all (default): every backend present"},
      {"cases", "N", "random cases per backend (default 200)"},
      {"seed", "S", "seed of the cases and their values (default 1)"},
      {"mode", "M", "only mode 1, 2 or 3 (default: all)"},
      {"dtype", "D", "only operands of f32, bf16 or f16 (default: all)"},
      {"max-dim", "N", "upper bound of the random cases' sizes (default 40)"},
      {"no-grid", "", "only the random cases"},
      {"quick", "", "30 random cases and the grid: a few seconds"},
      {"verbose", "", "print every case"},
  };
  h.examples =
      "  ragdot verify\n"
      "  ragdot verify --backend cpu --quick\n"
      "  ragdot verify --backend cuda --cases 2000 --mode 2\n";
  return h;
}

bool fold_unsupported(BackendTally& t, const verify::Case& c, const PlanOptions& options) {
  // Plan first: an op the backend declines is unsupported there, not wrong.
  auto op = RaggedDot::create(c.spec);
  if (!op.ok()) return false;  // check_case reports the invalid case as a failure
  auto plan = make_plan(*op, options);
  if (plan.ok() || plan.status().code() != StatusCode::kUnsupported) return false;
  ++t.unsupported;
  ++t.unsupported_reasons[plan.status().message()];
  return true;
}

void verify_backend(BackendTally& t, const std::vector<MatrixCase>& cases, bool verbose, Progress& progress) {
  progress.begin("verify " + t.backend.name + ": " + std::to_string(cases.size()) + " cases");
  std::string why;
  verify::MemoryOps* memory = verify::memory_for(t.backend.memory_space, &why);
  if (memory == nullptr) {
    t.not_run = std::string("no ") + memory_space_name(t.backend.memory_space) + " memory: " + why;
    progress.fail(t.not_run);
    return;
  }
  PlanOptions options;
  options.backend = t.backend.name;
  for (const MatrixCase& mc : cases) {
    if (fold_unsupported(t, mc.c, options)) {
      if (verbose) std::printf("  %-8s unsupported  %s\n", t.backend.name.c_str(), mc.c.description.c_str());
      continue;
    }
    const verify::CheckResult r = verify::check_case(mc.c, options, mc.data_seed, *memory);
    if (r.tolerance > 0) t.worst_error_ratio = std::max(t.worst_error_ratio, r.rel_error / r.tolerance);
    if (r.passed) {
      ++t.passed;
    } else {
      ++t.failed;
      t.failures.push_back(mc.c.description + ": " + r.message);
    }
    if (verbose) {
      std::printf("  %-8s %-11s  %s (error %.2e, tolerance %.2e)\n", t.backend.name.c_str(),
                  r.passed ? "passed" : "FAILED", mc.c.description.c_str(), r.rel_error, r.tolerance);
    }
  }
  progress.done(format("%d passed, %d failed, %d unsupported", t.passed, t.failed, t.unsupported));
}

std::vector<BackendInfo> backends_to_verify(const std::string& wanted) {
  std::vector<BackendInfo> out;
  for (const auto& b : list_backends()) {
    if (wanted == "all" || b.name == wanted) out.push_back(b);
  }
  return out;
}

}  // namespace

int command_verify(const std::vector<std::string>& args) {
  const CommandHelp help = verify_help();
  const ParsedOptions o = parse_options("verify", help.options, args);
  if (o.help_requested()) {
    std::fputs(render_help(help).c_str(), stdout);
    return kExitOk;
  }
  const std::string wanted_text = o.get("backend").value_or("all");
  const std::string wanted = wanted_text == "all" ? "all" : parse_backend_name(wanted_text, "backend", false);
  MatrixOptions m;
  if (o.has("quick")) m.random_cases = 30;
  if (auto v = o.get("cases")) m.random_cases = int(parse_integer(*v, "cases", 0, 1000000));
  if (auto v = o.get("seed")) m.seed = parse_seed(*v, "seed");
  if (auto v = o.get("mode")) m.mode = parse_mode(*v, "mode");
  if (auto v = o.get("dtype")) m.dtype = parse_operand_dtype(*v, "dtype");
  if (auto v = o.get("max-dim")) m.max_dim = parse_integer(*v, "max-dim", 1, 512);
  m.pattern_grid = !o.has("no-grid");
  const bool verbose = o.has("verbose");

  const std::vector<MatrixCase> cases = build_matrix(m);
  std::vector<BackendTally> tallies;
  for (const auto& b : backends_to_verify(wanted)) {
    BackendTally t;
    t.backend = b;
    if (!b.available) t.not_run = "not available here: " + b.detail;
    tallies.push_back(std::move(t));
  }
  if (wanted != "all" && !tallies.front().not_run.empty()) {
    std::fprintf(stderr, "ragdot verify: backend '%s' is %s\n", wanted.c_str(), tallies.front().not_run.c_str());
    return kExitFailure;
  }

  int to_run = 0;
  for (const auto& t : tallies) to_run += t.not_run.empty() ? 1 : 0;
  Progress progress(to_run);
  for (auto& t : tallies) {
    if (t.not_run.empty()) verify_backend(t, cases, verbose, progress);
  }

  const int random = m.random_cases;
  const int grid = int(cases.size()) - random;
  std::printf("ragdot verify: %d random cases (seed %llu) + %d grid cases per backend, against the float64 reference\n\n",
              random, (unsigned long long)m.seed, grid);
  TextTable table;
  table.add_column("backend");
  table.add_column("memory");
  for (const char* h : {"passed", "failed", "unsupported", "worst error/tolerance"}) {
    table.add_column(h, TextTable::Align::kRight);
  }
  table.add_column("result");
  int verified = 0;
  bool any_failed = false;
  for (const auto& t : tallies) {
    if (!t.not_run.empty()) {
      table.add_row({t.backend.name, memory_space_name(t.backend.memory_space), "-", "-", "-", "-",
                     "not run: " + t.not_run});
      continue;
    }
    ++verified;
    any_failed = any_failed || t.failed > 0;
    table.add_row({t.backend.name, memory_space_name(t.backend.memory_space), std::to_string(t.passed),
                   std::to_string(t.failed), std::to_string(t.unsupported), format("%.3f", t.worst_error_ratio),
                   t.failed ? "FAILED" : t.passed ? "passed" : "nothing supported"});
  }
  std::fputs(table.render().c_str(), stdout);

  for (const auto& t : tallies) {
    if (t.unsupported_reasons.empty() || !verbose) continue;
    std::printf("\n%s declined:\n", t.backend.name.c_str());
    for (const auto& [reason, count] : t.unsupported_reasons) std::printf("  %4d x %s\n", count, reason.c_str());
  }
  for (const auto& t : tallies) {
    if (t.failures.empty()) continue;
    std::printf("\n%s failures (%zu):\n", t.backend.name.c_str(), t.failures.size());
    for (std::size_t i = 0; i < t.failures.size() && int(i) < kFailuresShown; ++i) {
      std::printf("  %s\n", t.failures[i].c_str());
    }
    if (int(t.failures.size()) > kFailuresShown) std::printf("  ... and %zu more\n", t.failures.size() - kFailuresShown);
  }
  if (verified == 0) {
    std::printf("\nno backend could be verified here\n");
    return kExitFailure;
  }
  std::printf("\n%s\n", any_failed ? "verification FAILED" : "all verified backends passed");
  return any_failed ? kExitFailure : kExitOk;
}

}  // namespace ragdot::cli
