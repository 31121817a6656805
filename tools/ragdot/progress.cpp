#include "progress.hpp"

#include <cstdio>

namespace ragdot::cli {

void Progress::begin(const std::string& what) {
  ++step_;
  if (quiet_) return;
  if (open_) std::fputc('\n', stderr);
  std::fprintf(stderr, "[%d/%d] %s ...", step_, total_, what.c_str());
  std::fflush(stderr);
  open_ = true;
}

void Progress::done(const std::string& result) {
  if (quiet_) return;
  std::fprintf(stderr, open_ ? " %s\n" : "%s\n", result.c_str());
  open_ = false;
}

void Progress::fail(const std::string& why) {
  if (open_) std::fputc('\n', stderr);
  std::fprintf(stderr, "  error: %s\n", why.c_str());
  open_ = false;
}

void Progress::note(const std::string& message) {
  if (quiet_) return;
  if (open_) std::fputc('\n', stderr);
  std::fprintf(stderr, "%s\n", message.c_str());
  open_ = false;
}

}  // namespace ragdot::cli
