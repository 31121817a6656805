#include "preset_options.hpp"

#include "usage_error.hpp"
#include "value_parsers.hpp"

namespace ragdot::cli {

workloads::MoePreset parse_preset(std::string_view text, std::string_view option) {
  auto preset = workloads::find_preset(text);
  if (!preset.ok()) throw UsageError("--" + std::string(option) + ": " + preset.status().message());
  return *preset;
}

std::vector<workloads::MoePreset> parse_preset_list(std::string_view text, std::string_view option) {
  if (text == "all") return workloads::presets();
  std::vector<workloads::MoePreset> out;
  for (const auto& name : split_list(text, option)) out.push_back(parse_preset(name, option));
  return out;
}

std::string preset_names() {
  std::string names;
  for (const auto& p : workloads::presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

}  // namespace ragdot::cli
