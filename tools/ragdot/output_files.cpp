#include "output_files.hpp"

#include <fstream>

namespace ragdot::cli {

Status ensure_writable(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  if (!out) return invalid_argument("cannot write '" + path + "'");
  return Status::ok();
}

Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return invalid_argument("cannot write '" + path + "'");
  out << text;
  out.close();
  if (!out) return internal_error("writing '" + path + "' failed");
  return Status::ok();
}

}  // namespace ragdot::cli
