#include "backends/cpu/gemm_driver.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>

namespace ragdot::cpu {

namespace {
constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
char* align_ptr(void* p) {
  auto u = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<char*>((u + kAlign - 1) / kAlign * kAlign);
}
}  // namespace

GemmDriver::GemmDriver(const kernels::IsaKernels* isa, DType a_dtype, DType b_dtype, DType c_dtype, std::int64_t n,
                       std::int64_t max_k, std::int64_t typical_m, int threads)
    : isa_(isa), a_dtype_(a_dtype), b_dtype_(b_dtype), c_dtype_(c_dtype), n_(n) {
  blk_.threads = std::max(threads, 1);
  blk_.max_k = std::max<std::int64_t>(max_k, 1);
  const std::int64_t kp = kernels::round_up(blk_.max_k, isa->k_align);
  // A B panel of about 512 KiB stays in a core's L2 while its rows stream past.
  const std::int64_t panel_budget = 512 * 1024;
  std::int64_t nb = panel_budget / (kp * isa->b_elem_bytes);
  nb = std::clamp<std::int64_t>(nb / isa->nr * isa->nr, isa->nr, 256);
  nb = std::min(nb, kernels::round_up(std::max<std::int64_t>(n, 1), isa->nr));
  blk_.nb = nb;
  // Rows per unit: whole groups up to a cap, so B panels are packed once per group where possible.
  const std::int64_t cap = 512;
  blk_.m_chunk = kernels::round_up(std::clamp<std::int64_t>(typical_m, isa->mr, cap), isa->mr);
}

std::size_t GemmDriver::per_thread_bytes() const {
  const std::int64_t kp = kernels::round_up(blk_.max_k, isa_->k_align);
  const std::size_t panel = align_up(std::size_t(kp * blk_.nb * isa_->b_elem_bytes));
  const std::size_t strip = align_up(std::size_t(isa_->mr * kp * isa_->a_elem_bytes));
  const std::size_t cblock = align_up(std::size_t(isa_->mr * blk_.nb * 4));
  return panel + strip + cblock;
}

std::size_t GemmDriver::scratch_bytes(std::int64_t max_tasks) const {
  return kAlign + per_thread_bytes() * std::size_t(blk_.threads) + align_up(std::size_t(max_tasks + 1) * 8);
}

void GemmDriver::run(const GemmTask* tasks, std::int64_t count, void* scratch) const {
  const kernels::IsaKernels& isa = *isa_;
  const std::int64_t nb = blk_.nb, chunk = blk_.m_chunk;
  const std::int64_t nblocks = (n_ + nb - 1) / nb;
  char* base = align_ptr(scratch);
  const std::size_t per_thread = per_thread_bytes();
  std::int64_t* prefix = reinterpret_cast<std::int64_t*>(base + per_thread * std::size_t(blk_.threads));
  prefix[0] = 0;
  for (std::int64_t t = 0; t < count; ++t) {
    const std::int64_t m = tasks[t].m;
    prefix[t + 1] = prefix[t] + (m > 0 ? ((m + chunk - 1) / chunk) * nblocks : 0);
  }
  const std::int64_t total = prefix[count];
  if (total == 0) return;
  const std::size_t a_es = dtype_size(a_dtype_), b_es = dtype_size(b_dtype_), c_es = dtype_size(c_dtype_);
  const std::int64_t kp_max = kernels::round_up(blk_.max_k, isa.k_align);
  std::atomic<std::int64_t> next{0};
  const int threads = int(std::min<std::int64_t>(blk_.threads, total));

#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num();
    char* mine = base + per_thread * std::size_t(tid);
    void* panel = mine;
    void* strip = mine + align_up(std::size_t(kp_max * nb * isa.b_elem_bytes));
    float* cblock = reinterpret_cast<float*>(static_cast<char*>(strip) + align_up(std::size_t(isa.mr * kp_max * isa.a_elem_bytes)));
    isa.thread_begin();
    for (;;) {
      const std::int64_t u = next.fetch_add(1, std::memory_order_relaxed);
      if (u >= total) break;
      const std::int64_t t = std::upper_bound(prefix, prefix + count + 1, u) - prefix - 1;
      const GemmTask& task = tasks[t];
      const std::int64_t local = u - prefix[t];
      const std::int64_t nbi = local % nblocks, mci = local / nblocks;
      const std::int64_t n0 = nbi * nb, ncols = std::min(nb, n_ - n0);
      const std::int64_t m0 = mci * chunk, m1 = std::min(task.m, m0 + chunk);
      char* cbase = static_cast<char*>(task.c) + std::size_t(m0 * task.c_rs + n0 * task.c_cs) * c_es;
      const kernels::OutView out{cbase, task.c_rs, task.c_cs, c_dtype_};
      if (task.k == 0) {
        isa.zero(m1 - m0, ncols, out);
        continue;
      }
      const std::int64_t npad = kernels::round_up(ncols, isa.nr);
      const kernels::MatrixView bview{static_cast<const char*>(task.b) + std::size_t(n0 * task.b_cs) * b_es, task.b_rs,
                                      task.b_cs, b_dtype_};
      isa.pack_b(bview, task.k, ncols, npad, panel);
      const bool direct = isa.a_direct({task.a, task.a_rs, task.a_cs, a_dtype_}, task.k);
      for (std::int64_t r0 = m0; r0 < m1; r0 += isa.mr) {
        const std::int64_t rows = std::min<std::int64_t>(isa.mr, m1 - r0);
        const char* arow = static_cast<const char*>(task.a) + std::size_t(r0 * task.a_rs) * a_es;
        const void* a = arow;
        std::int64_t ars = task.a_rs, acs = task.a_cs;
        if (!(direct && rows == isa.mr)) {
          ars = isa.pack_a({arow, task.a_rs, task.a_cs, a_dtype_}, rows, task.k, strip);
          acs = 1;
          a = strip;
        }
        isa.compute(a, ars, acs, panel, task.k, npad, cblock);
        const kernels::OutView o{cbase + std::size_t((r0 - m0) * task.c_rs) * c_es, task.c_rs, task.c_cs, c_dtype_};
        isa.store(cblock, npad, rows, ncols, o);
      }
    }
    isa.thread_end();
  }
}

}  // namespace ragdot::cpu
