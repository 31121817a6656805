// Backend names on the command line: registry names, or "auto" for the automatic choice.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragdot/plan.hpp"

namespace ragdot::cli {

// Returns the registry name, or "" for "auto" (when allowed). Throws UsageError for a name the
// library does not know, listing the names it does.
std::string parse_backend_name(std::string_view text, std::string_view option, bool allow_auto);

std::optional<BackendInfo> find_backend(std::string_view name);

// Ok when `name` can run here; otherwise why not. For "" (automatic choice) that is RAGDOT_BACKEND
// when it is set, else always ok: the reference backend runs everywhere.
Status require_available(const std::string& name);

// Where buffers must live for `name`; for "" the space of the backend automatic selection tries
// first (RAGDOT_BACKEND, else the first available automatic backend).
MemorySpace expected_memory_space(const std::string& name);

// The memory space `name` runs on in a comparison with `others`: a name registered for both
// spaces ("padded") runs on the device when another backend of the comparison does and its device
// version is available here, so that it is measured beside them; nullopt leaves the library's
// choice (the host).
std::optional<MemorySpace> space_in_comparison(const std::string& name, const std::vector<std::string>& others);

}  // namespace ragdot::cli
