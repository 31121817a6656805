#include "core/env.hpp"

#include <cstdlib>
#include <thread>

namespace ragdot::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

bool flag(const char* name) {
  auto v = get(name);
  if (!v) return false;
  return *v == "1" || *v == "true" || *v == "yes" || *v == "on" || *v == "TRUE" || *v == "ON";
}

int num_threads() {
  if (auto v = get("RAGDOT_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(v->c_str(), &end, 10);
    if (end && *end == '\0' && n > 0 && n <= 4096) return int(n);
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? int(hc) : 1;
}

std::string cache_dir() {
  if (auto v = get("RAGDOT_CACHE_DIR")) return *v;
  if (auto x = get("XDG_CACHE_HOME")) return *x + "/ragdot";
  if (auto h = get("HOME")) return *h + "/.cache/ragdot";
  return "/tmp/ragdot-cache";
}

}  // namespace ragdot::env
