// The JIT cache: compiled kernels by content key, in memory and on disk under RAGDOT_CACHE_DIR.
// The key hashes the generated source, every header it may include, the NVRTC version, the
// compile options and the architecture, so any change to any of them is a new entry. Entries are
// written to a temporary file and renamed into place (readers never see half an entry); an entry
// whose header, key, size or checksum does not match is recompiled and rewritten, never used. A
// cache directory that cannot be written is not an error: the kernel is compiled in memory.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cuda/nvrtc_compiler.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cuda {

struct CompiledKernel {
  std::string key;
  std::vector<char> cubin;
  std::string log;
  enum class Origin { kCompiled, kDisk, kMemory } origin = Origin::kCompiled;
  double compile_ms = 0.0;  // NVRTC time when compiled now, else 0
  double load_ms = 0.0;     // time to find it (disk read and checks, or the memory lookup)
};

struct CacheStats {
  int memory_hits = 0, disk_hits = 0, compiles = 0, rejected_entries = 0, write_failures = 0;
};

class KernelCache {
 public:
  static KernelCache& instance();

  // The cubin for `source` on `arch`, from memory, disk, or NVRTC, in that order.
  Result<std::shared_ptr<const CompiledKernel>> get(const std::string& source, const std::string& source_name,
                                                    const std::string& arch);

  // The key of `source` on `arch` with this process's NVRTC, compile options and embedded headers;
  // the second form takes each input explicitly (what the first hashes, so tests can vary each).
  static std::string key_for(const std::string& source, const std::string& arch);
  static std::string key_for(const std::string& source, const std::string& arch, const std::string& compiler,
                             const std::vector<std::string>& options, const std::vector<SourceFile>& headers);
  std::string entry_path(const std::string& key) const;
  CacheStats stats() const;
  // Forgets the in-memory entries (the disk stays), so the next lookup measures a disk load.
  void clear_memory();

 private:
  KernelCache() = default;
  std::shared_ptr<const CompiledKernel> read_disk(const std::string& key, bool& rejected) const;
  bool write_disk(const CompiledKernel& k) const;
  void dump(const std::string& source, const CompiledKernel& k) const;

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> memory_;
  CacheStats stats_;
};

}  // namespace ragdot::cuda
