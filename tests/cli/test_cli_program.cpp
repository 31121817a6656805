// The `ragdot` program as a user runs it: exit codes, help, error messages, the main job, the
// verification matrix, and the files bench writes. Sizes are small so that the suite stays quick.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <fstream>
#include <iterator>

#include "json_reader.hpp"
#include "png_reader.hpp"
#include "program_runner.hpp"
#include "ragdot/plan.hpp"
#include "ragdot/version.hpp"

namespace ragdot::testing {
namespace {

const std::string kProgram = RAGDOT_CLI_PROGRAM;

ProgramResult ragdot(const std::vector<std::string>& args,
                     const std::map<std::string, std::optional<std::string>>& env = {}) {
  // Tests must not depend on the caller's RAGDOT_* settings unless they set them.
  std::map<std::string, std::optional<std::string>> clean = {
      {"RAGDOT_BACKEND", std::nullopt}, {"RAGDOT_PRINT_PLAN", std::nullopt}, {"RAGDOT_CPU_ISA", std::nullopt}};
  for (const auto& [k, v] : env) clean[k] = v;
  return run_program(kProgram, args, clean);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) ++n;
  return n;
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/ragdot-cli-" + std::to_string(::getpid()) + "-" + name;
}

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::optional<BackendInfo> backend_named(const std::string& name) {
  for (const auto& b : list_backends()) {
    if (b.name == name) return b;
  }
  return std::nullopt;
}

const std::vector<std::string> kCommands = {"run", "verify", "bench", "plan", "info"};

// A layer that runs in well under a second on any CPU.
const std::vector<std::string> kSmallLayer = {"--model", "qwen3-30b-a3b", "--tokens", "32", "--shrink", "8",
                                              "--reps", "1"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(CliProgram, TopLevelHelpListsEveryCommand) {
  const auto r = ragdot({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "usage: ragdot <command>"));
  for (const auto& c : kCommands) EXPECT_TRUE(contains(r.out, "  " + c + " ")) << c;
}

TEST(CliProgram, NoArgumentsPrintsUsageAndExitsTwo) {
  const auto r = ragdot({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "usage: ragdot"));
  EXPECT_TRUE(r.out.empty());
}

TEST(CliProgram, EveryCommandHasHelp) {
  for (const auto& c : kCommands) {
    const auto r = ragdot({c, "--help"});
    EXPECT_EQ(r.exit_code, 0) << c << ": " << r.err;
    EXPECT_EQ(r.out.rfind("usage: ragdot " + c, 0), 0u) << r.out;
    EXPECT_TRUE(contains(r.out, "options:")) << c;
    EXPECT_TRUE(contains(r.out, "--help")) << c;
    EXPECT_TRUE(contains(r.out, "exit status")) << c;
    EXPECT_EQ(ragdot({"help", c}).out, r.out) << "'ragdot help " << c << "' differs from --help";
  }
}

TEST(CliProgram, VersionIsTheLibraryVersion) {
  const auto r = ragdot({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "ragdot " + std::string(version_string()) + "\n");
}

TEST(CliProgram, BadOptionsExitTwoWithAMessage) {
  struct BadCall {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<BadCall> calls = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"help", "frobnicate"}, "unknown command 'frobnicate'"},
      {{"run", "--bogus"}, "unknown option '--bogus' for 'ragdot run'"},
      {{"run", "--tokens"}, "option '--tokens' needs a value"},
      {{"run", "--tokens", "abc"}, "invalid value 'abc' for --tokens"},
      {{"run", "--tokens", "0"}, "invalid value '0' for --tokens"},
      {{"run", "--tokens=12x"}, "invalid value '12x' for --tokens"},
      {{"run", "--skew", "nan"}, "invalid value 'nan' for --skew"},
      {{"run", "--dtype", "i32"}, "expected f32, bf16 or f16"},
      {{"run", "--model", "gpt-5"}, "unknown model preset 'gpt-5'"},
      {{"run", "--backend", "nope"}, "unknown backend 'nope' for --backend"},
      {{"run", "stray"}, "unexpected argument 'stray'"},
      {{"run", "--quiet=yes"}, "option '--quiet' takes no value"},
      {{"verify", "--mode", "4"}, "invalid value '4' for --mode"},
      {{"verify", "--cases", "-1"}, "invalid value '-1' for --cases"},
      {{"bench", "--backends", "cpu,,padded"}, "without empty items"},
      {{"bench", "--backends", "cpu,nope"}, "unknown backend 'nope' for --backends"},
      {{"bench", "--gemms", "sideways"}, "invalid value 'sideways' for --gemms"},
      {{"bench", "--model", "mixtral,gpt-5"}, "unknown model preset 'gpt-5'"},
      {{"plan"}, "give the sizes --m, --k and --n"},
      {{"plan", "--m", "-1", "--k", "2", "--n", "3"}, "invalid value '-1' for --m"},
      {{"plan", "--m", "4", "--k", "4", "--n", "4", "--groups", "4", "--local-groups", "9"}, "the op is invalid"},
      {{"plan", "--model", "mixtral", "--m", "3"}, "either --model or the sizes"},
      {{"plan", "--m", "4", "--k", "4", "--n", "4", "--effort", "max"}, "invalid value 'max' for --effort"},
      {{"info", "--json"}, "unknown option '--json' for 'ragdot info'"},
  };
  for (const auto& c : calls) {
    const auto r = ragdot(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += " " + a;
    EXPECT_EQ(r.exit_code, 2) << "ragdot" << joined << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "ragdot: error: ")) << joined << ": " << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << "ragdot" << joined << " said: " << r.err;
    EXPECT_TRUE(r.out.empty()) << joined << ": " << r.out;
  }
}

TEST(CliProgram, AMissingGpuIsAFailureThatSaysWhy) {
  const auto cuda = backend_named("cuda");
  if (!cuda) GTEST_SKIP() << "built without the GPU backends";
  if (cuda->available) GTEST_SKIP() << "a GPU is present";
  for (const std::string command : {"run", "verify"}) {
    const auto r = ragdot({command, "--backend", "cuda"});
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_TRUE(contains(r.err, "not available here")) << r.err;
    EXPECT_TRUE(contains(r.err, cuda->detail)) << r.err;
  }
}

TEST(CliProgram, RunChecksBothGemmsAndComparesWithPadding) {
  const auto r = ragdot(with({"run", "--backend", "cpu"}, kSmallLayer));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* column : {"time", "TFLOP/s", "GB/s", "padded", "speedup", "check"}) {
    EXPECT_TRUE(contains(r.out, column)) << column;
  }
  EXPECT_TRUE(contains(r.out, "check up: passed")) << r.out;
  EXPECT_TRUE(contains(r.out, "check down: passed")) << r.out;
  EXPECT_TRUE(contains(r.out, "plan backend=cpu ")) << r.out;
  EXPECT_TRUE(contains(r.out, "plan backend=padded ")) << r.out;
  // progress on stderr, results on stdout
  EXPECT_TRUE(contains(r.err, "[1/4]")) << r.err;
  EXPECT_TRUE(contains(r.err, "[4/4]")) << r.err;
  EXPECT_FALSE(contains(r.out, "[1/4]"));
}

TEST(CliProgram, RunWithDefaultsPicksABackendAndPasses) {
  // the automatic choice and the automatic size (measured speed), on a small preset
  const auto r = ragdot({"run", "--model", "qwen3-30b-a3b", "--no-baseline", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, ": passed"), 2u) << r.out;
  EXPECT_TRUE(r.err.empty()) << "--quiet: " << r.err;
}

TEST(CliProgram, RunHonoursRagdotBackend) {
  const auto r = ragdot(with({"run", "--no-baseline", "--quiet"}, kSmallLayer), {{"RAGDOT_BACKEND", "cpu_ref"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "plan backend=cpu_ref ")) << r.out;

  const auto bad = ragdot(with({"run"}, kSmallLayer), {{"RAGDOT_BACKEND", "bogus"}});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "RAGDOT_BACKEND=bogus names no backend")) << bad.err;
}

TEST(CliProgram, VerifyCpuQuickPasses) {
  const auto r = ragdot({"verify", "--backend", "cpu", "--quick"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "all verified backends passed")) << r.out;
  EXPECT_TRUE(contains(r.out, "cpu ")) << r.out;
  EXPECT_FALSE(contains(r.out, "padded")) << "only the named backend runs";
}

TEST(CliProgram, VerifyAllCoversEveryPresentBackend) {
  const auto r = ragdot({"verify", "--cases", "5", "--mode", "1", "--dtype", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const auto& b : list_backends()) {
    EXPECT_TRUE(contains(r.out, b.name)) << b.name;
    if (!b.available) EXPECT_TRUE(contains(r.out, "not run")) << b.name;
  }
}

TEST(CliProgram, BenchWritesValidJsonAndPng) {
  const std::string json_path = temp_path("bench.json"), png_path = temp_path("bench.png");
  const auto r = ragdot(with({"bench", "--backends", "cpu,padded", "--skews", "0,1.2", "--json", json_path, "--plot",
                              png_path, "--quiet"},
                             kSmallLayer));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "cpu TFLOP/s")) << r.out;
  EXPECT_TRUE(contains(r.out, "padded TFLOP/s")) << r.out;
  EXPECT_TRUE(contains(r.out, "cpu vs padded")) << r.out;

  const auto bytes = read_bytes(json_path);
  std::string error;
  const auto doc = parse_json(std::string(bytes.begin(), bytes.end()), &error);
  ASSERT_TRUE(doc) << error;
  ASSERT_NE(doc->get("results"), nullptr);
  const auto& results = doc->get("results")->array;
  EXPECT_EQ(results.size(), 8u) << "2 skews x 2 gemms x 2 backends";
  for (const auto& rec : results) {
    for (const char* key : {"model", "gemm", "m", "k", "n", "backend", "median_seconds", "tflops", "gbps", "check"}) {
      EXPECT_NE(rec.get(key), nullptr) << key;
    }
    EXPECT_EQ(rec.get("model")->string, "qwen3-30b-a3b");
    EXPECT_GT(rec.get("median_seconds")->number, 0.0);
    EXPECT_TRUE(rec.get("check")->get("passed")->boolean);
    EXPECT_EQ(rec.get("error")->kind, JsonValue::Kind::kNull);
  }
  EXPECT_EQ(doc->get("tool")->string, "ragdot bench");

  const auto png = read_png(read_bytes(png_path), &error);
  ASSERT_TRUE(png) << error;
  EXPECT_GE(png->width, 640);
  EXPECT_GE(png->height, 400);
  std::remove(json_path.c_str());
  std::remove(png_path.c_str());
}

TEST(CliProgram, BenchRefusesAnUnwritableOutputBeforeMeasuring) {
  const auto r = ragdot(with({"bench", "--backends", "cpu", "--json", "/nonexistent-dir/out.json"}, kSmallLayer));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "cannot write '/nonexistent-dir/out.json'")) << r.err;
  EXPECT_FALSE(contains(r.err, "[1/")) << "nothing was measured";
}

TEST(CliProgram, LayerRunsForwardAndBackwardBesideThePaddedBaselines) {
  const auto r = ragdot({"layer", "--model", "deepseek-v3", "--tokens", "64", "--shrink", "32", "--reps", "1",
                         "--capacity-factor", "1.0"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "MoE layer deepseek-v3 / 32: 64 tokens, hidden 224, ffn 64, 256 experts, top-8, 1 shared"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "check against the dropless baseline")) << r.out;
  EXPECT_TRUE(contains(r.out, ": ok")) << r.out;
  EXPECT_TRUE(contains(r.out, "ragdot (cpu)")) << r.out;
  EXPECT_TRUE(contains(r.out, "padded, dropless")) << r.out;
  EXPECT_TRUE(contains(r.out, "padded, capacity factor 1.00")) << r.out;
  // 512 pairs over 256 experts at capacity 2 per expert: a seeded router always overflows some
  EXPECT_FALSE(contains(r.out, "padded, capacity factor 1.00            0 of 512")) << r.out;
  const auto bad = ragdot({"layer", "--backend", "cublas"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_EQ(ragdot({"layer", "--json", "layer.json"}).exit_code, 2) << "--json is for the GPU layer";
}

TEST(CliProgram, LayerTakesAGatedActivation) {
  const auto r = ragdot({"layer", "--model", "qwen3-30b-a3b", "--tokens", "32", "--shrink", "32", "--reps", "1",
                         "--activation", "geglu_tanh"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "top-8, 0 shared, geglu_tanh, f32")) << r.out;
  EXPECT_TRUE(contains(r.out, ": ok")) << r.out;  // the padded baseline runs the same activation
  const auto unknown = ragdot({"layer", "--activation", "relu"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(unknown.err, "known: swiglu, geglu, geglu_tanh")) << unknown.err;
  const auto fused = ragdot({"layer", "--backend", "cuda", "--activation", "geglu", "--fused-swiglu"});
  EXPECT_EQ(fused.exit_code, 2) << "the SwiGLU epilogue cannot apply GeGLU";
  EXPECT_TRUE(contains(fused.err, "--fused-swiglu fuses SwiGLU only")) << fused.err;
}

TEST(CliProgram, LayerOnTheGpuRunsOrSaysWhyNot) {
  // a small layer, so that it is quick where there is a GPU
  const auto r = ragdot({"layer", "--backend", "cuda", "--model", "qwen3-30b-a3b", "--tokens", "64", "--shrink", "16",
                         "--reps", "1", "--warmup", "0", "--no-baseline"});
  if (r.exit_code == 0) {
    EXPECT_TRUE(contains(r.out, "MoE layer qwen3-30b-a3b / 16: 64 tokens")) << r.out;
    EXPECT_TRUE(contains(r.out, "ragdot (cuda)")) << r.out;
    EXPECT_TRUE(contains(r.out, "permutation + combine")) << r.out;
  } else if (r.exit_code == 2) {  // a build without the GPU backends does not know the name
    EXPECT_TRUE(contains(r.err, "unknown backend 'cuda'")) << r.err;
  } else {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "not available")) << r.err;
  }
}

TEST(CliProgram, PlanPrintsTheOpAndOneLinePlan) {
  const auto r = ragdot({"plan", "--mode", "2", "--m", "64", "--k", "128", "--n", "32", "--groups", "4", "--dtype",
                         "f32", "--backend", "cpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "op    ragged_dot_general(ragged-contracting")) << r.out;
  EXPECT_TRUE(contains(r.out, "-> f32[4,64,32]")) << r.out;
  EXPECT_TRUE(contains(r.out, "\nplan backend=cpu ")) << r.out;
  EXPECT_EQ(count(r.out, "\n"), 2u) << "the op and the plan, one line each";
  EXPECT_TRUE(r.err.empty());
}

TEST(CliProgram, PlanHonoursRagdotPrintPlan) {
  const auto r = ragdot({"plan", "--m", "64", "--k", "32", "--n", "16", "--backend", "cpu"},
                        {{"RAGDOT_PRINT_PLAN", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "ragdot: plan backend=cpu ")) << r.err;
}

TEST(CliProgram, PlanForEveryBackendSaysWhichDecline) {
  const auto r = ragdot({"plan", "--mode", "3", "--m", "8", "--k", "8", "--n", "8", "--groups", "2", "--backend", "all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "cpu_ref  plan backend=cpu_ref")) << r.out;
  EXPECT_TRUE(contains(r.out, "padded   declines: unsupported")) << r.out;
}

TEST(CliProgram, InfoNamesEveryBackendAndWhyOneIsMissing) {
  const auto r = ragdot({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ragdot " + std::string(version_string()))) << r.out;
  EXPECT_TRUE(contains(r.out, "features")) << r.out;
  for (const auto& b : list_backends()) {
    EXPECT_TRUE(contains(r.out, b.name)) << b.name;
    EXPECT_TRUE(contains(r.out, b.detail)) << b.name << ": " << b.detail;
  }
  for (const char* preset : {"mixtral-8x7b", "deepseek-v3", "llama4-scout", "qwen3-30b-a3b"}) {
    EXPECT_TRUE(contains(r.out, preset));
  }
}

}  // namespace
}  // namespace ragdot::testing
