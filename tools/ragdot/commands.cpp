#include "commands.hpp"

#include <cstdio>
#include <exception>
#include <new>
#include <string_view>

#include "ragdot/version.hpp"
#include "usage_error.hpp"

namespace ragdot::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"run", "run one MoE layer's ragged dots on the best backend here, check them, compare with padding",
       command_run},
      {"layer", "run one whole MoE layer (router to combine), forward and backward, beside padding",
       command_layer},
      {"verify", "check backends against the float64 reference on a matrix of random and edge cases",
       command_verify},
      {"bench", "compare backends side by side on the model presets; JSON and PNG output", command_bench},
      {"plan", "describe a ragged dot from flags and print the plan a backend makes for it", command_plan},
      {"info", "version, machine, CPU features, and which backends are present (and why not)", command_info},
  };
  return list;
}

namespace {

std::string top_usage() {
  std::string s =
      "usage: ragdot <command> [options]\n"
      "\n"
      "ragdot computes jax.lax.ragged_dot_general, the ragged dot of Mixture-of-Experts layers, as a\n"
      "Group-GEMM on the CPU or a GPU.\n"
      "\n"
      "commands:\n";
  for (const auto& c : commands()) s += "  " + std::string(c.name) + std::string(8 - std::string_view(c.name).size(), ' ') + c.summary + "\n";
  s +=
      "\n"
      "'ragdot <command> --help' describes a command and its options; 'ragdot --version' prints the version.\n";
  return s;
}

const Command* find_command(std::string_view name) {
  for (const auto& c : commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

[[noreturn]] void unknown_command(std::string_view name) {
  std::string names;
  for (const auto& c : commands()) names += (names.empty() ? "" : ", ") + std::string(c.name);
  throw UsageError("unknown command '" + std::string(name) + "' (commands: " + names + "; see 'ragdot --help')");
}

int dispatch(const std::vector<std::string>& words) {
  if (words.empty()) {
    std::fputs(top_usage().c_str(), stderr);
    return kExitUsage;
  }
  const std::string& first = words[0];
  if (first == "--help" || first == "-h" || (first == "help" && words.size() == 1)) {
    std::fputs(top_usage().c_str(), stdout);
    return kExitOk;
  }
  if (first == "--version" || first == "version") {
    std::printf("ragdot %s\n", version_string());
    return kExitOk;
  }
  if (first == "help") {
    const Command* c = find_command(words[1]);
    if (c == nullptr) unknown_command(words[1]);
    return c->run({"--help"});
  }
  const Command* c = find_command(first);
  if (c == nullptr) unknown_command(first);
  return c->run(std::vector<std::string>(words.begin() + 1, words.end()));
}

}  // namespace

int run_program(const std::vector<std::string>& words) {
  // stdout carries results; flush it before an error on stderr so that the two stay in order
  try {
    return dispatch(words);
  } catch (const UsageError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ragdot: error: %s\n", e.what());
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "ragdot: error: out of host memory\n");
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ragdot: internal error: %s\n", e.what());
    return kExitFailure;
  }
}

}  // namespace ragdot::cli
