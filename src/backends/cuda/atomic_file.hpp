// Cache entries published whole: written to a temporary file beside the entry, then renamed over
// it, so that a reader (another thread or process) sees the old entry or the new one, never half.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ragdot::cuda {

// Writes `bytes` to `path` (creating its directory); false when it cannot (a read-only cache
// directory is not an error for the caller: its entries then live in memory only).
bool publish_file(const std::string& path, std::string_view bytes);

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> read_whole_file(const std::string& path);

}  // namespace ragdot::cuda
