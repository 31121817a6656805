// Runs a program with arguments and extra environment, capturing its exit code, stdout and stderr.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ragdot::testing {

struct ProgramResult {
  int exit_code = -1;  // 128 + signal number when a signal ended it
  std::string out, err;
};

// `environment` entries are set (a value) or removed (nullopt) on top of this process's environment.
ProgramResult run_program(const std::string& path, const std::vector<std::string>& args,
                          const std::map<std::string, std::optional<std::string>>& environment = {});

}  // namespace ragdot::testing
