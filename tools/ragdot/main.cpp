// ragdot: the command-line program. Everything lives in the commands (commands.hpp).
#include <string>
#include <vector>

#include "commands.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  return ragdot::cli::run_program(words);
}
