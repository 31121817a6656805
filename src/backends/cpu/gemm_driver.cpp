#include "backends/cpu/gemm_driver.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

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
                       std::int64_t max_k, std::int64_t typical_m, int threads, bool gathered_a)
    : isa_(isa), a_dtype_(a_dtype), b_dtype_(b_dtype), c_dtype_(c_dtype), n_(n), gathered_a_(gathered_a) {
  blk_.threads = std::max(threads, 1);
  blk_.max_k = std::max<std::int64_t>(max_k, 1);
  // k blocks: a whole k when it is short, else blocks of kc_max (split evenly, k_align multiples)
  const std::int64_t kblocks = (blk_.max_k + isa->kc_max - 1) / isa->kc_max;
  blk_.kc = kernels::round_up((blk_.max_k + kblocks - 1) / kblocks, isa->k_align);
  // The panel stays in cache while A's rows stream past; narrow panels also keep the next
  // panel's packing, interleaved with compute, in small steps.
  std::int64_t nb = isa->panel_budget / (blk_.kc * isa->b_elem_bytes);
  nb = std::clamp<std::int64_t>(nb / isa->nr * isa->nr, isa->nr, 256);
  nb = std::min(nb, kernels::round_up(std::max<std::int64_t>(n, 1), isa->nr));
  blk_.nb = nb;
  // Rows per unit: whole groups up to a cap, so B panels are packed once per group where possible.
  const std::int64_t cap = 512;
  blk_.m_chunk = kernels::round_up(std::clamp<std::int64_t>(typical_m, isa->mr, cap), isa->mr);
  // f32 rows 4 KiB apart are packed strip by strip (12 such rows share one L1 set); without the
  // cache each strip is packed again for every column panel of the unit's rows. The cache holds
  // every k block of the unit's rows (m_chunk x max_k, 2 MiB at k = 1024), up to a bound on
  // the scratch it adds per thread (k = 8192 at 512 rows).
  // (Gathered rows are copied into a dense strip first: no 4 KiB strides to avoid.)
  blk_.cache_packed_a = !gathered_a && isa->a_elem_bytes == 4 && (blk_.max_k * 4) % 4096 == 0;
  if (blk_.cache_packed_a && packed_a_bytes() > (std::size_t(20) << 20)) blk_.cache_packed_a = false;
}

std::size_t GemmDriver::panel_bytes() const { return align_up(std::size_t(blk_.kc * blk_.nb * isa_->b_elem_bytes)); }

std::size_t GemmDriver::strip_bytes() const {
  // pack_a may pad each row (to a cache line, and off 4 KiB strides): up to 32 elements
  return align_up(std::size_t(isa_->mr * (blk_.kc + 32) * isa_->a_elem_bytes));
}

std::size_t GemmDriver::cblock_bytes() const {
  // With k split, a unit's partial sums stay in the block between k blocks.
  const std::int64_t rows = blk_.kc < blk_.max_k ? blk_.m_chunk : isa_->mr;
  return align_up(std::size_t(rows * blk_.nb * 4));
}

std::size_t GemmDriver::packed_a_bytes() const {
  const std::int64_t kblocks = (blk_.max_k + blk_.kc - 1) / blk_.kc;
  return blk_.cache_packed_a ? std::size_t(blk_.m_chunk / isa_->mr * kblocks) * strip_bytes() : 0;
}

std::size_t GemmDriver::gather_bytes() const {
  return gathered_a_ ? align_up(std::size_t(isa_->mr * blk_.kc) * dtype_size(a_dtype_)) : 0;
}

std::size_t GemmDriver::per_thread_bytes() const {
  // two panels: one in use, one being packed
  return 2 * panel_bytes() + strip_bytes() + cblock_bytes() + packed_a_bytes() + gather_bytes();
}

std::size_t GemmDriver::scratch_bytes(std::int64_t max_tasks) const {
  return kAlign + per_thread_bytes() * std::size_t(blk_.threads) + align_up(std::size_t(max_tasks + 1) * 8);
}

void GemmDriver::run(const GemmTask* tasks, std::int64_t count, void* scratch) const {
  const kernels::IsaKernels& isa = *isa_;
  const std::int64_t nb = blk_.nb, chunk = blk_.m_chunk, kc = blk_.kc;
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
  std::atomic<std::int64_t> next{0};
  const int threads = int(std::min<std::int64_t>(blk_.threads, total));

  // A unit: rows [m0, m1) and columns [n0, n0 + ncols) of one task, all of k in blocks of kc.
  struct Unit {
    const GemmTask* task = nullptr;
    std::int64_t n0 = 0, ncols = 0, m0 = 0, m1 = 0;
  };
  auto decode = [&](std::int64_t u) {
    const std::int64_t t = std::upper_bound(prefix, prefix + count + 1, u) - prefix - 1;
    const std::int64_t local = u - prefix[t];
    Unit x;
    x.task = &tasks[t];
    x.n0 = (local % nblocks) * nb;
    x.ncols = std::min(nb, n_ - x.n0);
    x.m0 = (local / nblocks) * chunk;
    x.m1 = std::min(tasks[t].m, x.m0 + chunk);
    return x;
  };
  auto kblocks_of = [&](const GemmTask& t) { return (t.k + kc - 1) / kc; };
  // The packing job for panel (unit x, k block kb).
  auto make_job = [&](const Unit& x, std::int64_t kb, void* panel) {
    kernels::PanelJob j;
    const GemmTask& t = *x.task;
    const std::int64_t k0 = kb * kc, klen = std::min(kc, t.k - k0);
    j.b = {static_cast<const char*>(t.b) + std::size_t(k0 * t.b_rs + x.n0 * t.b_cs) * b_es, t.b_rs, t.b_cs, b_dtype_};
    j.k = klen;
    j.n = x.ncols;
    j.nb = kernels::round_up(x.ncols, isa.nr);
    j.panel = panel;
    j.end = kernels::round_up(klen, isa.k_align);
    return j;
  };
  auto same_panel = [](const Unit& a, const Unit& b) {
    const GemmTask &p = *a.task, &q = *b.task;
    return p.b == q.b && p.k == q.k && a.n0 == b.n0 && p.b_rs == q.b_rs && p.b_cs == q.b_cs;
  };

#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num();
    char* mine = base + per_thread * std::size_t(tid);
    void* panels[2] = {mine, mine + panel_bytes()};
    void* strip = mine + 2 * panel_bytes();
    float* cblock = reinterpret_cast<float*>(static_cast<char*>(strip) + strip_bytes());
    char* packed_a = reinterpret_cast<char*>(cblock) + cblock_bytes();
    char* gathered = packed_a + packed_a_bytes();  // a strip's gathered rows (gathered_a)
    // what packed_a holds: the strips of rows [m0, m1) of one task, packed with these strides
    const GemmTask* cached_task = nullptr;
    std::int64_t cached_m0 = -1;
    // and the strides pack_a returned for them: [0] for k blocks of length kc, [1] for a shorter last one
    kernels::StripStrides cached_strides[2] = {{0, 0}, {0, 0}};
    isa.thread_begin();
    std::int64_t u = next.fetch_add(1, std::memory_order_relaxed);
    int cur = 0;
    bool ready = false;  // panels[cur] already holds the panel the loop needs next
    while (u < total) {
      const Unit x = decode(u);
      const GemmTask& task = *x.task;
      char* cbase = static_cast<char*>(task.c) + std::size_t(x.m0 * task.c_rs + x.n0 * task.c_cs) * c_es;
      if (task.k == 0) {
        isa.zero(x.m1 - x.m0, x.ncols, {cbase, task.c_rs, task.c_cs, c_dtype_});
        u = next.fetch_add(1, std::memory_order_relaxed);
        ready = false;
        continue;
      }
      const std::int64_t npad = kernels::round_up(x.ncols, isa.nr);
      const std::int64_t kblocks = kblocks_of(task);
      const std::int64_t strips = (x.m1 - x.m0 + isa.mr - 1) / isa.mr;
      std::int64_t u_next = total;
      // packed_a holds strip s of k block kb at index kb * (m_chunk / mr) + s
      const bool cache_hit = blk_.cache_packed_a && cached_task == &task && cached_m0 == x.m0;
      if (blk_.cache_packed_a && !cache_hit) cached_task = nullptr;  // being refilled below
      for (std::int64_t kb = 0; kb < kblocks; ++kb) {
        if (!ready) {
          kernels::PanelJob j = make_job(x, kb, panels[cur]);
          j.limit = j.end;
          isa.pack_b(j);
        }
        // The next panel: this unit's next k block, or the next unit's first one (claimed now).
        kernels::PanelJob job;
        kernels::PanelJob* pending = nullptr;
        bool reuse = false;
        if (kb + 1 < kblocks) {
          job = make_job(x, kb + 1, panels[cur ^ 1]);
          pending = &job;
        } else {
          u_next = next.fetch_add(1, std::memory_order_relaxed);
          if (u_next < total) {
            const Unit y = decode(u_next);
            reuse = kblocks == 1 && same_panel(x, y);
            if (!reuse && y.task->k > 0) {
              job = make_job(y, 0, panels[cur ^ 1]);
              pending = &job;
            }
          }
        }
        const std::int64_t k0 = kb * kc, klen = std::min(kc, task.k - k0);
        const bool direct = isa.a_direct({task.a, task.a_rs, task.a_cs, a_dtype_}, klen);
        const bool split = kblocks > 1;
        const bool use_cache = blk_.cache_packed_a;
        char* cache_kb = packed_a + std::size_t(kb * (chunk / isa.mr)) * strip_bytes();
        std::int64_t s = 0;
        for (std::int64_t r0 = x.m0; r0 < x.m1; r0 += isa.mr, ++s) {
          const std::int64_t rows = std::min<std::int64_t>(isa.mr, x.m1 - r0);
          const char* arow = static_cast<const char*>(task.a) + std::size_t(r0 * task.a_rs + k0 * task.a_cs) * a_es;
          std::int64_t ars = task.a_rs, acs = task.a_cs;
          bool in_place = direct && (rows == isa.mr || r0 + isa.mr <= task.a_rows_readable);
          if (task.a_rows) {  // the strip's rows, k block [k0, k0 + klen), side by side
            const std::size_t row_bytes = std::size_t(klen) * a_es;
            for (std::int64_t r = 0; r < rows; ++r) {
              const std::int64_t i = task.a_rows[r0 + r];
              char* to = gathered + std::size_t(r) * row_bytes;
              if (i < 0 || i >= task.a_table_rows) {
                std::memset(to, 0, row_bytes);  // zero bits are 0.0 in every float dtype
              } else {
                std::memcpy(to, static_cast<const char*>(task.a) + std::size_t(i * task.a_rs + k0) * a_es, row_bytes);
              }
            }
            arow = gathered;
            ars = klen;
            acs = 1;
            in_place = rows == isa.mr && isa.a_direct({gathered, klen, 1, a_dtype_}, klen);
          }
          const void* a = arow;
          if (!in_place) {
            void* dst = use_cache ? cache_kb + std::size_t(s) * strip_bytes() : strip;
            kernels::StripStrides& known = cached_strides[klen == kc ? 0 : 1];
            if (!cache_hit) known = isa.pack_a({arow, ars, acs, a_dtype_}, rows, klen, dst);
            const kernels::StripStrides packed = known;
            ars = packed.row;
            acs = packed.col;
            a = dst;
          }
          if (pending) {  // this strip's share of the next panel, in whole packing steps
            const std::int64_t steps = pending->end / isa.k_step;
            pending->limit = std::min(pending->end, (steps * (s + 1) + strips - 1) / strips * isa.k_step);
          }
          float* c = split ? cblock + (r0 - x.m0) * npad : cblock;
          isa.compute(a, ars, acs, panels[cur], klen, npad, c, kb > 0, pending);
          if (kb + 1 == kblocks) {
            const kernels::OutView o{cbase + std::size_t((r0 - x.m0) * task.c_rs) * c_es, task.c_rs, task.c_cs,
                                     c_dtype_};
            isa.store(c, npad, rows, x.ncols, o);
          }
        }
        if (pending) {
          pending->limit = pending->end;
          isa.pack_b(*pending);  // whatever the strips left
          cur ^= 1;
        }
        ready = reuse || pending != nullptr;
      }
      if (blk_.cache_packed_a) {
        cached_task = &task;
        cached_m0 = x.m0;
      }
      u = u_next;
    }
    isa.thread_end();
  }
}

}  // namespace ragdot::cpu
