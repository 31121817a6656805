#include "option_parser.hpp"

#include <algorithm>

#include "usage_error.hpp"

namespace ragdot::cli {

std::optional<std::string> ParsedOptions::get(std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

namespace {

const OptionSpec* find_spec(const std::vector<OptionSpec>& specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string see_help(std::string_view command) { return " (see 'ragdot " + std::string(command) + " --help')"; }

}  // namespace

ParsedOptions parse_options(std::string_view command, const std::vector<OptionSpec>& specs,
                            const std::vector<std::string>& words) {
  ParsedOptions parsed;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "-h" || word == "--help") {
      parsed.help_ = true;
      continue;
    }
    if (word.size() < 3 || word.compare(0, 2, "--") != 0) {
      throw UsageError("unexpected argument '" + word + "' for 'ragdot " + std::string(command) + "'" +
                       see_help(command));
    }
    std::string name = word.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptionSpec* spec = find_spec(specs, name);
    if (spec == nullptr) {
      throw UsageError("unknown option '--" + name + "' for 'ragdot " + std::string(command) + "'" + see_help(command));
    }
    if (spec->value_name.empty()) {
      if (inline_value) throw UsageError("option '--" + name + "' takes no value");
      parsed.values_[name] = "";
      continue;
    }
    if (inline_value) {
      parsed.values_[name] = *inline_value;
    } else if (i + 1 < words.size()) {
      parsed.values_[name] = words[++i];
    } else {
      throw UsageError("option '--" + name + "' needs a value (" + spec->value_name + ")");
    }
  }
  return parsed;
}

std::string format_options(const std::vector<OptionSpec>& specs) {
  std::vector<std::string> heads;
  std::size_t width = 0;
  for (const auto& s : specs) {
    heads.push_back("--" + s.name + (s.value_name.empty() ? "" : " " + s.value_name));
    width = std::max(width, heads.back().size());
  }
  std::string out;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    out += "  " + heads[i] + std::string(width - heads[i].size() + 2, ' ');
    // continuation lines of a multi-line help text line up under its first line
    for (char c : specs[i].help) {
      out += c;
      if (c == '\n') out += std::string(width + 4, ' ');
    }
    out += '\n';
  }
  out += "  --help" + std::string(width > 6 ? width - 6 + 2 : 2, ' ') + "show this help\n";
  return out;
}

}  // namespace ragdot::cli
