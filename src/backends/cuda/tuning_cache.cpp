#include "backends/cuda/tuning_cache.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backends/cuda/atomic_file.hpp"
#include "backends/cuda/content_hash.hpp"
#include "backends/cuda/embedded_kernels.hpp"
#include "core/env.hpp"

namespace ragdot::cuda {

namespace {

constexpr const char* kHeader = "ragdot-tuning-v1";

// Tabs and line breaks would break the entry's fields: spaces instead.
std::string one_field(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string checksum_hex(const std::string& text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a64(text)));
  return buf;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t end = s.find(sep, at);
    out.push_back(s.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) return out;
    at = end + 1;
  }
}

}  // namespace

std::string format_tuning_record(const TuningRecord& r) {
  std::ostringstream s;
  s << kHeader << '\n' << "key " << r.key << '\n' << "chosen " << r.chosen << '\n';
  for (const auto& t : r.timings) {
    char us[32];
    std::snprintf(us, sizeof us, "%.3f", t.us);
    s << "timing\t" << us << '\t' << (t.spec.empty() ? "-" : one_field(t.spec)) << '\t' << one_field(t.name) << '\t'
      << one_field(t.note) << '\n';
  }
  const std::string body = s.str();
  return body + "check " + checksum_hex(body) + "\n";
}

std::optional<TuningRecord> parse_tuning_record(const std::string& text, const std::string& key) {
  const std::size_t check_at = text.rfind("check ");
  if (check_at == std::string::npos || (check_at > 0 && text[check_at - 1] != '\n')) return std::nullopt;
  const std::string body = text.substr(0, check_at);
  if (text.substr(check_at) != "check " + checksum_hex(body) + "\n") return std::nullopt;
  std::vector<std::string> lines = split(body, '\n');
  if (lines.empty() || !lines.back().empty()) return std::nullopt;  // the body ends with a line break
  lines.pop_back();
  if (lines.size() < 4 || lines[0] != kHeader || lines[1] != "key " + key || lines[2].rfind("chosen ", 0) != 0)
    return std::nullopt;
  TuningRecord r;
  r.key = key;
  char* end = nullptr;
  const long chosen = std::strtol(lines[2].c_str() + 7, &end, 10);
  if (end == lines[2].c_str() + 7 || *end != '\0') return std::nullopt;
  for (std::size_t i = 3; i < lines.size(); ++i) {
    const std::vector<std::string> f = split(lines[i], '\t');
    if (f.size() != 5 || f[0] != "timing" || f[3].empty()) return std::nullopt;
    TuningRecord::Timing t;
    t.us = std::strtod(f[1].c_str(), &end);
    if (f[1].empty() || *end != '\0' || !std::isfinite(t.us)) return std::nullopt;
    t.spec = f[2] == "-" ? "" : f[2];
    t.name = f[3];
    t.note = f[4];
    r.timings.push_back(std::move(t));
  }
  if (chosen < 0 || chosen >= long(r.timings.size()) || r.timings[std::size_t(chosen)].us < 0) return std::nullopt;
  r.chosen = int(chosen);
  return r;
}

TuningCache& TuningCache::instance() {
  static TuningCache* cache = new TuningCache();  // never destroyed: plans may outlive statics
  return *cache;
}

std::string TuningCache::key_for(const std::vector<std::string>& fields) {
  ContentHash h;
  h.add_field(kHeader);
  for (const auto& f : fields) h.add_field(f);
  for (const auto& f : embedded_kernel_headers()) h.add_field(f.name).add_field(f.text);
  return h.hex();
}

std::string TuningCache::entry_path(const std::string& key) const {
  return env::cache_dir() + "/tuning/" + key + ".txt";
}

std::optional<TuningRecord> TuningCache::find(const std::string& key) {
  // (a record remembered in memory may say the planner's choice was kept unmeasured)
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(key);
    if (it != memory_.end()) return it->second;
  }
  const std::optional<std::string> text = read_whole_file(entry_path(key));
  if (!text) return std::nullopt;
  std::optional<TuningRecord> r = parse_tuning_record(*text, key);
  if (r) {
    std::lock_guard<std::mutex> lock(mu_);
    memory_.emplace(key, *r);
  }
  return r;
}

bool TuningCache::store(const TuningRecord& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    memory_[r.key] = r;
  }
  return publish_file(entry_path(r.key), format_tuning_record(r));
}

void TuningCache::remember(const TuningRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  memory_[r.key] = r;
}

void TuningCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.clear();
}

}  // namespace ragdot::cuda
