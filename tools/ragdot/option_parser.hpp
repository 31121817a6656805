// Options of one command: `--name value`, `--name=value` and value-less switches. Unknown options,
// missing values and stray positional words are usage errors.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ragdot::cli {

struct OptionSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // "N", "LIST"...; empty for a switch
  std::string help;
};

class ParsedOptions {
 public:
  bool has(std::string_view name) const { return values_.count(std::string(name)) != 0; }
  std::optional<std::string> get(std::string_view name) const;
  bool help_requested() const { return help_; }

 private:
  friend ParsedOptions parse_options(std::string_view command, const std::vector<OptionSpec>& specs,
                                     const std::vector<std::string>& words);
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

// Throws UsageError naming the command and the offending word. A repeated option keeps its last value.
ParsedOptions parse_options(std::string_view command, const std::vector<OptionSpec>& specs,
                            const std::vector<std::string>& words);

// The aligned option list of a command's --help.
std::string format_options(const std::vector<OptionSpec>& specs);

}  // namespace ragdot::cli
