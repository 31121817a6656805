// AVX512_BF16 kernels: vdpbf16ps on bf16 pairs (12 x 32 block, 24 f32 accumulators). The bf16
// path where the CPU has AVX512_BF16 but no AMX. B is packed as k-pairs interleaved per column.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels/kernels.hpp"

namespace ragdot::cpu::kernels {

namespace {

#include "backends/cpu/kernels/avx512_common.inc"

constexpr int kMr = 12;
constexpr int kNr = 32;
constexpr int kPrefetchRows = 16;
constexpr int kPrefetchK = 16;  // B k rows (pairs of them) ahead of the micro-kernel

inline std::int64_t pad2(std::int64_t k) { return (k + 1) / 2 * 2; }

// Interleaves 32 bf16 of row k and row k+1 into [32 cols][2] (two zmm).
inline void interleave_rows32(__m512i r0, __m512i r1, std::uint16_t* dst) {
  alignas(64) static const std::uint16_t lo_idx[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                       8,  40, 9,  41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static const std::uint16_t hi_idx[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                       24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo = _mm512_permutex2var_epi16(r0, _mm512_load_si512(lo_idx), r1);
  const __m512i hi = _mm512_permutex2var_epi16(r0, _mm512_load_si512(hi_idx), r1);
  _mm512_storeu_si512(dst, lo);
  _mm512_storeu_si512(dst + 32, hi);
}

// Panel: [nb / 32][kp / 2][32][2] bf16, from a bf16 source. Packs k rows [job.next, end) (even
// bounds) and advances job.next.
void pack_rows(PanelJob& job, std::int64_t end) {
  const MatrixView& b = job.b;
  const std::int64_t k = job.k, n = job.n, nb = job.nb;
  std::uint16_t* p = static_cast<std::uint16_t*>(job.panel);
  const std::uint16_t* src = static_cast<const std::uint16_t*>(b.data);
  const std::int64_t kp = pad2(k);
  if (b.col_stride == 1) {
    for (std::int64_t kk = job.next; kk < end; kk += 2) {
      // rows are far apart: keep the ones a few steps ahead in flight (see amx_bf16.cpp)
      if (kk + kPrefetchRows + 1 < k) {
        const char* a0 = reinterpret_cast<const char*>(src + (kk + kPrefetchRows) * b.row_stride);
        const char* a1 = a0 + b.row_stride * 2;
        for (std::int64_t off = 0; off < n * 2; off += 64) {
          _mm_prefetch(a0 + off, _MM_HINT_T0);
          _mm_prefetch(a1 + off, _MM_HINT_T0);
        }
      }
      for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
        const std::int64_t valid = n - j0 < 0 ? 0 : (n - j0 > kNr ? kNr : n - j0);
        const __mmask32 m = valid >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << valid) - 1u);
        const __m512i r0 = kk < k ? _mm512_maskz_loadu_epi16(m, src + kk * b.row_stride + j0) : _mm512_setzero_si512();
        const __m512i r1 = kk + 1 < k ? _mm512_maskz_loadu_epi16(m, src + (kk + 1) * b.row_stride + j0) : _mm512_setzero_si512();
        interleave_rows32(r0, r1, p + j0 * kp + kk * kNr);
      }
    }
  } else {
    for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
      std::uint16_t* sub = p + j0 * kp;
      const std::int64_t valid = n - j0 < 0 ? 0 : (n - j0 > kNr ? kNr : n - j0);
      for (std::int64_t kk = job.next; kk < end; ++kk) {
        for (std::int64_t j = 0; j < kNr; ++j) {
          const bool in = kk < k && j < valid;
          sub[(kk / 2) * 2 * kNr + j * 2 + (kk & 1)] = in ? src[kk * b.row_stride + (j0 + j) * b.col_stride] : 0;
        }
      }
    }
  }
  job.next = end;
}

void pack_b(PanelJob& job) { pack_rows(job, job.limit); }

bool a_direct(MatrixView a, std::int64_t k) { return a.dtype == DType::kBF16 && a.col_stride == 1 && k % 2 == 0; }

StripStrides pack_a(MatrixView a, std::int64_t rows, std::int64_t k, void* strip) {
  std::uint16_t* s = static_cast<std::uint16_t*>(strip);
  const std::uint16_t* src = static_cast<const std::uint16_t*>(a.data);
  const std::int64_t kp = pad2(k);
  for (int r = 0; r < kMr; ++r) {
    std::uint16_t* dst = s + r * kp;
    if (r >= rows) {
      std::memset(dst, 0, std::size_t(kp) * 2);
      continue;
    }
    for (std::int64_t kk = 0; kk < kp; ++kk) dst[kk] = kk < k ? src[r * a.row_stride + kk * a.col_stride] : 0;
  }
  return {kp, 1};
}

inline __m512 dp(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
}

inline std::int32_t pair(const std::uint16_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// No call inside the k loop: around one, the compiler would keep the 24 accumulators in memory
// (the next panel's packing runs between blocks instead, see compute).
void block_12x32(const std::uint16_t* a, std::int64_t rs, const std::uint16_t* b, std::int64_t kp, float* c,
                 std::int64_t ldc, bool accumulate) {
  __m512 acc[kMr][2];
  for (int r = 0; r < kMr; ++r) {
    acc[r][0] = accumulate ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (std::int64_t kk = 0; kk < kp; kk += 2) {
    const __m512i b0 = _mm512_loadu_si512(b + kk * kNr);
    const __m512i b1 = _mm512_loadu_si512(b + kk * kNr + 32);
    _mm_prefetch(reinterpret_cast<const char*>(b + (kk + kPrefetchK) * kNr), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + (kk + kPrefetchK) * kNr + 32), _MM_HINT_T0);
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) {
      const __m512i x = _mm512_set1_epi32(pair(a + r * rs + kk));
      acc[r][0] = dp(acc[r][0], x, b0);
      acc[r][1] = dp(acc[r][1], x, b1);
    }
  }
  for (int r = 0; r < kMr; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
  }
}

void compute(const void* a, std::int64_t rs, std::int64_t, const void* panel, std::int64_t k, std::int64_t nb,
             float* c, bool accumulate, PanelJob* job) {
  const std::int64_t kp = pad2(k);
  const std::uint16_t* A = static_cast<const std::uint16_t*>(a);
  const std::uint16_t* P = static_cast<const std::uint16_t*>(panel);
  // the next panel's packing is spread over the gaps between blocks
  Pacer<pack_rows> pacer(job, nb / kNr, 2);
  for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
    block_12x32(A, rs, P + j0 * kp, kp, c + j0, nb, accumulate);
    pacer.step();
  }
}

}  // namespace

const IsaKernels& avx512_bf16_kernels() {
  static const IsaKernels k{"avx512-bf16", kMr, kNr, 2, 2, 2, 2, 256 * 1024, 512, no_thread_setup, fence_streaming_stores, pack_b, a_direct, pack_a, compute, store_c, zero_c};
  return k;
}

}  // namespace ragdot::cpu::kernels
