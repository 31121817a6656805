// The --help text of a command: usage line, what it does, its options and the exit codes.
#pragma once

#include <string>
#include <vector>

#include "option_parser.hpp"

namespace ragdot::cli {

struct CommandHelp {
  std::string name;         // "run"
  std::string synopsis;     // "[--model PRESET] [--tokens N]"
  std::string description;  // one or more paragraphs, already wrapped
  std::vector<OptionSpec> options;
  std::string examples;     // lines of example invocations, already indented; may be empty
};

std::string render_help(const CommandHelp& help);

}  // namespace ragdot::cli
