#include "backends/cuda/kernel_cache.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backends/cuda/atomic_file.hpp"
#include "backends/cuda/content_hash.hpp"
#include "backends/cuda/embedded_kernels.hpp"
#include "core/env.hpp"

namespace ragdot::cuda {

namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'R', 'A', 'G', 'D', 'O', 'T', 'K', '1'};
constexpr std::size_t kKeyChars = 32;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t checksum(const std::vector<char>& cubin, const std::string& log) {
  return fnv1a64(std::string_view(cubin.data(), cubin.size())) ^ (fnv1a64(log) * 0x9e3779b97f4a7c15ull);
}

void put_u64(std::string& s, std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
bool get_u64(const std::string& s, std::size_t& pos, std::uint64_t& v) {
  if (pos + 8 > s.size()) return false;
  std::memcpy(&v, s.data() + pos, 8);
  pos += 8;
  return true;
}

}  // namespace

KernelCache& KernelCache::instance() {
  static KernelCache* cache = new KernelCache();  // never destroyed: plans may outlive statics
  return *cache;
}

std::string KernelCache::key_for(const std::string& source, const std::string& arch) {
  return key_for(source, arch, nvrtc_build(), compile_options(arch), embedded_kernel_headers());
}

std::string KernelCache::key_for(const std::string& source, const std::string& arch, const std::string& compiler,
                                 const std::vector<std::string>& options, const std::vector<SourceFile>& headers) {
  ContentHash h;
  h.add_field("ragdot-kernel-cache-v2").add_field(source).add_field(arch).add_field(compiler);
  h.add_field(std::to_string(options.size()));
  for (const auto& o : options) h.add_field(o);
  for (const auto& f : headers) h.add_field(f.name).add_field(f.text);
  return h.hex();
}

std::string KernelCache::entry_path(const std::string& key) const {
  return env::cache_dir() + "/kernels/" + key + ".cubin";
}

std::shared_ptr<const CompiledKernel> KernelCache::read_disk(const std::string& key, bool& rejected) const {
  rejected = false;
  const std::optional<std::string> file = read_whole_file(entry_path(key));
  if (!file) return nullptr;
  const std::string& s = *file;
  rejected = true;  // until every field checks out
  if (s.size() < sizeof kMagic + kKeyChars || std::memcmp(s.data(), kMagic, sizeof kMagic) != 0) return nullptr;
  if (s.compare(sizeof kMagic, kKeyChars, key) != 0) return nullptr;
  std::size_t pos = sizeof kMagic + kKeyChars;
  std::uint64_t cubin_size = 0, log_size = 0, sum = 0;
  if (!get_u64(s, pos, cubin_size) || !get_u64(s, pos, log_size) || !get_u64(s, pos, sum)) return nullptr;
  if (cubin_size == 0 || pos + cubin_size + log_size != s.size()) return nullptr;
  auto k = std::make_shared<CompiledKernel>();
  k->key = key;
  k->cubin.assign(s.begin() + std::ptrdiff_t(pos), s.begin() + std::ptrdiff_t(pos + cubin_size));
  k->log.assign(s, pos + cubin_size, log_size);
  if (checksum(k->cubin, k->log) != sum) return nullptr;
  k->origin = CompiledKernel::Origin::kDisk;
  rejected = false;
  return k;
}

bool KernelCache::write_disk(const CompiledKernel& k) const {
  std::string blob(kMagic, sizeof kMagic);
  blob += k.key;
  put_u64(blob, k.cubin.size());
  put_u64(blob, k.log.size());
  put_u64(blob, checksum(k.cubin, k.log));
  blob.append(k.cubin.data(), k.cubin.size());
  blob += k.log;
  return publish_file(entry_path(k.key), blob);
}

void KernelCache::dump(const std::string& source, const CompiledKernel& k) const {
  if (!env::dump_source() && !env::dump_sass()) return;
  std::error_code ec;
  const fs::path dir = fs::path(env::cache_dir()) / "dump";
  fs::create_directories(dir, ec);
  const std::string base = (dir / k.key).string();
  if (env::dump_source()) std::ofstream(base + ".cu") << source;
  if (env::dump_sass()) {
    std::ofstream(base + ".cubin", std::ios::binary).write(k.cubin.data(), std::streamsize(k.cubin.size()));
    std::ofstream(base + ".log") << k.log;
    // Disassembly is best effort: cuobjdump is not part of the library's dependencies.
    const std::string cmd = "command -v cuobjdump >/dev/null 2>&1 && cuobjdump --dump-sass '" + base + ".cubin' > '" +
                            base + ".sass' 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) std::ofstream(base + ".sass") << "(cuobjdump not found on PATH)\n";
  }
}

Result<std::shared_ptr<const CompiledKernel>> KernelCache::get(const std::string& source,
                                                               const std::string& source_name,
                                                               const std::string& arch) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string key = key_for(source, arch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(key);
    if (it != memory_.end()) {
      ++stats_.memory_hits;
      auto k = std::make_shared<CompiledKernel>(*it->second);
      k->origin = CompiledKernel::Origin::kMemory;
      k->compile_ms = 0.0;
      k->load_ms = ms_since(t0);
      return std::shared_ptr<const CompiledKernel>(std::move(k));
    }
  }
  bool rejected = false;
  std::shared_ptr<const CompiledKernel> found = read_disk(key, rejected);
  if (found) {
    auto k = std::make_shared<CompiledKernel>(*found);
    k->load_ms = ms_since(t0);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.disk_hits;
    memory_.emplace(key, k);
    return std::shared_ptr<const CompiledKernel>(std::move(k));
  }
  RAGDOT_ASSIGN_OR_RETURN(CompileOutput compiled, compile_to_cubin(source, source_name, embedded_kernel_headers(), arch));
  auto k = std::make_shared<CompiledKernel>();
  k->key = key;
  k->cubin = std::move(compiled.cubin);
  k->log = std::move(compiled.log);
  k->origin = CompiledKernel::Origin::kCompiled;
  k->compile_ms = compiled.milliseconds;
  k->load_ms = ms_since(t0);
  const bool written = write_disk(*k);
  dump(source, *k);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.compiles;
  if (rejected) ++stats_.rejected_entries;
  if (!written) ++stats_.write_failures;
  memory_.emplace(key, k);
  return std::shared_ptr<const CompiledKernel>(std::move(k));
}

CacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.clear();
}

}  // namespace ragdot::cuda
