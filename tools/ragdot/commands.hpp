// The subcommands of `ragdot` and the dispatch from the command line to them.
#pragma once

#include <string>
#include <vector>

namespace ragdot::cli {

// Each command takes the words after its name and returns the process exit code. Bad options
// throw UsageError; everything the library reports comes back as a message and exit code 1.
int command_run(const std::vector<std::string>& args);
int command_layer(const std::vector<std::string>& args);
int command_verify(const std::vector<std::string>& args);
int command_bench(const std::vector<std::string>& args);
int command_plan(const std::vector<std::string>& args);
int command_info(const std::vector<std::string>& args);

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

// In the order `ragdot --help` lists them.
const std::vector<Command>& commands();

// The whole program: `words` are argv[1..]. Never throws; turns usage errors into exit code 2
// and anything unexpected into a message and exit code 1.
int run_program(const std::vector<std::string>& words);

}  // namespace ragdot::cli
