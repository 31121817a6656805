// Model presets on the command line: one name, or a list of them, or "all".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ragdot/workloads.hpp"

namespace ragdot::cli {

inline constexpr const char* kDefaultModel = "mixtral-8x7b";

// A preset by its name (or its family's short name, "qwen3"); throws UsageError listing the names.
workloads::MoePreset parse_preset(std::string_view text, std::string_view option);
// Comma-separated presets, or "all" for every preset.
std::vector<workloads::MoePreset> parse_preset_list(std::string_view text, std::string_view option);

// "mixtral-8x7b, deepseek-v3, ..." for help texts.
std::string preset_names();

}  // namespace ragdot::cli
