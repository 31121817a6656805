#include "command_help.hpp"

namespace ragdot::cli {

std::string render_help(const CommandHelp& help) {
  std::string out = "usage: ragdot " + help.name + (help.synopsis.empty() ? "" : " " + help.synopsis) + "\n\n";
  out += help.description;
  if (!help.description.empty() && help.description.back() != '\n') out += '\n';
  out += "\noptions:\n" + format_options(help.options);
  if (!help.examples.empty()) out += "\nexamples:\n" + help.examples;
  out += "\nexit status: 0 success, 1 a check failed or the library returned an error, 2 bad options\n";
  return out;
}

}  // namespace ragdot::cli
