// Runs a batch of independent GEMMs (one per group and outer index) on the cpu backend's kernels:
// splits them into (group, n-panel, m-chunk) units, hands units to threads from a shared counter,
// and sweeps each unit's rows in strips over a packed B panel. Each thread claims its next unit
// before computing the current one and packs that unit's panel inside the current compute calls
// (double-buffered), so the weights stream in while the matrix units work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels/kernels.hpp"
#include "core/element_limit.hpp"

namespace ragdot::cpu {

// C[m x n] = A[m x k] * B[k x n]; pointers already at the group's first element, strides in elements.
struct GemmTask {
  const void* a;
  std::int64_t a_rs, a_cs;
  const void* b;
  std::int64_t b_rs, b_cs;
  void* c;
  std::int64_t c_rs, c_cs;
  std::int64_t m, k;
  // Rows of A that may be read from `a` (>= m): a short last strip reads rows past m in place
  // (their results are dropped) instead of copying them, while they stay inside the buffer.
  std::int64_t a_rows_readable = 0;
  // Gathered A (a driver made with gathered_a): row r is row a_rows[r] of the table at `a` (rows
  // a_rs apart, a_cs = 1); an index outside [0, a_table_rows) is a row of zeros.
  const std::int32_t* a_rows = nullptr;
  std::int64_t a_table_rows = 0;
};

// Whether `outer` x `groups` tasks (a plan keeps one per outer index and group in its workspace,
// and the driver 8 bytes more each) can be sized without overflow. Their count is bounded by the
// weights' elements, but not their bytes.
inline bool task_bytes_fit(std::int64_t outer, std::int64_t groups) {
  return core::elements_fit({outer, groups, std::int64_t(sizeof(GemmTask))});
}

struct GemmBlocking {
  std::int64_t nb = 0;        // panel width (multiple of the kernel's nr)
  std::int64_t kc = 0;        // k per panel (k longer than this is split into blocks)
  std::int64_t m_chunk = 0;   // rows per unit (multiple of the kernel's mr)
  std::int64_t max_k = 0;     // largest k of any task
  int threads = 1;
  // Keep the packed A strips of a whole unit per thread, so that the thread's next units on the
  // same rows (other column panels) reuse them instead of packing again, for every k block. On
  // for the f32 kernels with a k of whole 4 KiB rows, where A cannot be read in place, while the
  // cache stays under 20 MiB per thread.
  bool cache_packed_a = false;
};

class GemmDriver {
 public:
  GemmDriver() = default;
  // gathered_a: tasks may read A through a row index (GemmTask::a_rows); each thread then copies
  // a strip's rows into a buffer of its own before packing or reading them.
  GemmDriver(const kernels::IsaKernels* isa, DType a_dtype, DType b_dtype, DType c_dtype, std::int64_t n,
             std::int64_t max_k, std::int64_t typical_m, int threads, bool gathered_a = false);

  const kernels::IsaKernels& isa() const { return *isa_; }
  const GemmBlocking& blocking() const { return blk_; }
  // Scratch for all threads (64-byte aligned pieces), plus the unit prefix sums of up to max_tasks.
  std::size_t scratch_bytes(std::int64_t max_tasks) const;
  // Runs tasks[0..count). Tasks with m == 0 are skipped; tasks with k == 0 write zeros.
  void run(const GemmTask* tasks, std::int64_t count, void* scratch) const;

 private:
  std::size_t per_thread_bytes() const;
  std::size_t panel_bytes() const;
  std::size_t strip_bytes() const;
  std::size_t cblock_bytes() const;
  std::size_t packed_a_bytes() const;  // one unit's packed strips, when cache_packed_a
  std::size_t gather_bytes() const;    // one strip of gathered rows, when gathered_a

  const kernels::IsaKernels* isa_ = nullptr;
  DType a_dtype_ = DType::kF32, b_dtype_ = DType::kF32, c_dtype_ = DType::kF32;
  std::int64_t n_ = 0;
  bool gathered_a_ = false;
  GemmBlocking blk_;
};

}  // namespace ragdot::cpu
