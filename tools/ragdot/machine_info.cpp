#include "machine_info.hpp"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <thread>

#include "ragdot/plan.hpp"

namespace ragdot::cli {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        while (!v.empty() && v.front() == ' ') v.erase(v.begin());
        return v;
      }
    }
  }
  return "unknown cpu";
}

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

double available_host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0.0;
}

std::string machine_description() {
  std::string s = host_name() + ": " + cpu_model() + ", " + std::to_string(hardware_threads()) + " threads";
  for (const auto& b : list_backends()) {
    if (b.available && b.memory_space == MemorySpace::kDevice) {
      s += "; " + b.name + ": " + b.detail;
      break;
    }
  }
  return s;
}

std::string utc_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ragdot::cli
