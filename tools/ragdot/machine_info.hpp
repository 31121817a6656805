// What a result was measured on: for reports and benchmark records.
#pragma once

#include <string>

namespace ragdot::cli {

std::string host_name();
std::string cpu_model();  // from /proc/cpuinfo; "unknown cpu" elsewhere
int hardware_threads();
// MemAvailable from /proc/meminfo, in bytes; 0 when unknown.
double available_host_memory_bytes();
// "host: cpu, N threads" plus the GPU backend's description when one is available.
std::string machine_description();
// UTC, ISO 8601: "2026-12-02T23:12:05Z"
std::string utc_timestamp();

}  // namespace ragdot::cli
