// Output files of the commands that write reports (JSON): checked for writability before any
// measurement, written in one go afterwards.
#pragma once

#include <string>

#include "ragdot/status.hpp"

namespace ragdot::cli {

// Opens (and so creates) `path` for appending, so that a bad path fails in a second, not after
// minutes of benchmarking.
Status ensure_writable(const std::string& path);

Status write_text_file(const std::string& path, const std::string& text);

}  // namespace ragdot::cli
