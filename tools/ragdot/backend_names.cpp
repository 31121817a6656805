#include "backend_names.hpp"

#include <cstdlib>

#include "usage_error.hpp"

namespace ragdot::cli {

namespace {

std::string built_names() {
  std::string names;
  for (const auto& b : list_backends()) names += (names.empty() ? "" : ", ") + b.name;
  return names;
}

}  // namespace

std::string parse_backend_name(std::string_view text, std::string_view option, bool allow_auto) {
  if (allow_auto && (text == "auto" || text.empty())) return "";
  std::string known;
  for (const auto& b : list_backends()) {
    if (b.name == text) return b.name;
    known += (known.empty() ? "" : ", ") + b.name;
  }
  throw UsageError("unknown backend '" + std::string(text) + "' for --" + std::string(option) + " (built: " + known +
                   (allow_auto ? ", or auto" : "") + ")");
}

std::optional<BackendInfo> find_backend(std::string_view name) {
  for (auto& b : list_backends()) {
    if (b.name == name) return b;
  }
  return std::nullopt;
}

Status require_available(const std::string& name) {
  if (name.empty()) {
    // The library takes RAGDOT_BACKEND when no backend is named; a bad value should fail here,
    // once and naming the variable, not in every plan.
    const char* env = std::getenv("RAGDOT_BACKEND");
    if (env == nullptr || *env == '\0') return Status::ok();  // the reference backend is always there
    auto info = find_backend(env);
    if (!info) return invalid_argument("RAGDOT_BACKEND=" + std::string(env) + " names no backend (built: " +
                                       built_names() + ")");
    if (!info->available) {
      return unavailable("RAGDOT_BACKEND=" + std::string(env) + ": that backend is not available here: " + info->detail);
    }
    return Status::ok();
  }
  auto info = find_backend(name);
  if (!info) return invalid_argument("no backend named '" + name + "' (built: " + built_names() + ")");
  if (!info->available) return unavailable("backend '" + name + "' is not available here: " + info->detail);
  return Status::ok();
}

MemorySpace expected_memory_space(const std::string& name) {
  std::string wanted = name;
  if (wanted.empty()) {
    if (const char* env = std::getenv("RAGDOT_BACKEND"); env != nullptr && *env != '\0') wanted = env;
  }
  for (const auto& b : list_backends()) {
    if (!wanted.empty() ? b.name == wanted : (b.available && b.automatic)) return b.memory_space;
  }
  return MemorySpace::kHost;
}

std::optional<MemorySpace> space_in_comparison(const std::string& name, const std::vector<std::string>& others) {
  bool device_version = false;
  for (const auto& b : list_backends()) {
    device_version |= b.name == name && b.available && b.memory_space == MemorySpace::kDevice;
  }
  if (!device_version || expected_memory_space(name) == MemorySpace::kDevice) return std::nullopt;
  for (const auto& other : others) {
    if (other != name && expected_memory_space(other) == MemorySpace::kDevice) return MemorySpace::kDevice;
  }
  return std::nullopt;
}

}  // namespace ragdot::cli
