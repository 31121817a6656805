// AVX-512F kernels: f32 FMA micro-kernel (12 x 32 block, 24 accumulators), inputs of any float
// type converted to f32 while packing. The f32 path of the cpu backend, and bf16/f16 without
// AVX512_BF16.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels/kernels.hpp"

namespace ragdot::cpu::kernels {

namespace {

#include "backends/cpu/kernels/avx512_common.inc"

constexpr int kMr = 12;
constexpr int kNr = 32;
constexpr int kPrefetchRows = 16;
constexpr int kPrefetchK = 8;  // the panel's rows the micro-kernel fetches ahead (from L2)

// Panel: [nb / 32][k][32] f32. Packs k rows [job.next, end) and advances job.next.
void pack_rows(PanelJob& job, std::int64_t end) {
  const MatrixView& b = job.b;
  const std::int64_t k = job.k, n = job.n, nb = job.nb;
  float* p = static_cast<float*>(job.panel);
  const std::int64_t es = std::int64_t(dtype_size(b.dtype));
  if (b.col_stride == 1) {
    for (std::int64_t kk = job.next; kk < end; ++kk) {
      const char* row = static_cast<const char*>(b.data) + kk * b.row_stride * es;
      // rows are far apart: keep the ones a few steps ahead in flight (see amx_bf16.cpp)
      if (kk + kPrefetchRows < k) {
        const char* ahead = row + kPrefetchRows * b.row_stride * es;
        for (std::int64_t off = 0; off < n * es; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
      }
      for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
        const std::int64_t valid = n - j0 < 0 ? 0 : (n - j0 > kNr ? kNr : n - j0);
        const __mmask16 m0 = valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid) - 1u);
        const __mmask16 m1 = valid >= 32 ? __mmask16(0xffff) : valid > 16 ? __mmask16((1u << (valid - 16)) - 1u) : __mmask16(0);
        float* dst = p + j0 * k + kk * kNr;
        _mm512_storeu_ps(dst, load16_as_f32(row + j0 * es, b.dtype, m0));
        _mm512_storeu_ps(dst + 16, load16_as_f32(row + (j0 + 16) * es, b.dtype, m1));
      }
    }
  } else {
    // Transposed source (k contiguous, e.g. [n, k] weights): walk each column's k run.
    for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
      float* sub = p + j0 * k;
      const std::int64_t valid = n - j0 < 0 ? 0 : (n - j0 > kNr ? kNr : n - j0);
      for (std::int64_t j = 0; j < kNr; ++j) {
        const std::int64_t col = (j0 + j) * b.col_stride;
        for (std::int64_t kk = job.next; kk < end; ++kk) {
          sub[kk * kNr + j] = j < valid ? load1_as_f32(b.data, b.dtype, col + kk * b.row_stride) : 0.0f;
        }
      }
    }
  }
  job.next = end;
}

void pack_b(PanelJob& job) { pack_rows(job, job.limit); }

// Row stride of a packed strip: k rounded up to a cache line, plus one more line whenever the
// stride would be a multiple of 4 KiB (12 rows 4 KiB apart fall in one L1 set and evict each
// other while the kernel walks them side by side).
std::int64_t strip_row_stride(std::int64_t k) {
  std::int64_t rs = (k + 15) / 16 * 16;
  if ((rs * 4) % 4096 == 0) rs += 16;
  return rs;
}

// f32 rows are read in place unless their stride is a multiple of 4 KiB (then they are packed).
bool a_direct(MatrixView a, std::int64_t) { return a.dtype == DType::kF32 && (a.row_stride * 4) % 4096 != 0; }

StripStrides pack_a(MatrixView a, std::int64_t rows, std::int64_t k, void* strip) {
  float* s = static_cast<float*>(strip);
  const std::int64_t es = std::int64_t(dtype_size(a.dtype));
  const std::int64_t rs = strip_row_stride(k);
  for (int r = 0; r < kMr; ++r) {
    float* dst = s + r * rs;
    if (r >= rows) {
      std::memset(dst, 0, std::size_t(k) * 4);
      continue;
    }
    if (a.col_stride == 1) {
      const char* src = static_cast<const char*>(a.data) + r * a.row_stride * es;
      for (std::int64_t kk = 0; kk < k; kk += 16) {
        const __mmask16 m = k - kk >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - kk)) - 1u);
        _mm512_mask_storeu_ps(dst + kk, m, load16_as_f32(src + kk * es, a.dtype, m));
      }
    } else {
      for (std::int64_t kk = 0; kk < k; ++kk) dst[kk] = load1_as_f32(a.data, a.dtype, r * a.row_stride + kk * a.col_stride);
    }
  }
  return {rs, 1};
}

// C[12 x 32] = A[12 x k] * B[k x 32]; A read at a[r * rs + kk * cs]. Nothing else happens in
// the k loop: a call in it (the next panel's packing) would make the compiler spill all 24
// accumulators around it.
template <bool kUnitCol>
inline void block_12x32(const float* a, std::int64_t rs, std::int64_t cs, const float* b, std::int64_t k, float* c,
                        std::int64_t ldc, bool accumulate) {
  __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  __m512 c60, c61, c70, c71, c80, c81, c90, c91, ca0, ca1, cb0, cb1;
  if (accumulate) {
#define RAGDOT_LOAD_ROW(r, x0, x1)          \
  x0 = _mm512_loadu_ps(c + (r) * ldc);      \
  x1 = _mm512_loadu_ps(c + (r) * ldc + 16);
    RAGDOT_LOAD_ROW(0, c00, c01)
    RAGDOT_LOAD_ROW(1, c10, c11)
    RAGDOT_LOAD_ROW(2, c20, c21)
    RAGDOT_LOAD_ROW(3, c30, c31)
    RAGDOT_LOAD_ROW(4, c40, c41)
    RAGDOT_LOAD_ROW(5, c50, c51)
    RAGDOT_LOAD_ROW(6, c60, c61)
    RAGDOT_LOAD_ROW(7, c70, c71)
    RAGDOT_LOAD_ROW(8, c80, c81)
    RAGDOT_LOAD_ROW(9, c90, c91)
    RAGDOT_LOAD_ROW(10, ca0, ca1)
    RAGDOT_LOAD_ROW(11, cb0, cb1)
#undef RAGDOT_LOAD_ROW
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm512_setzero_ps();
    c60 = c61 = c70 = c71 = c80 = c81 = c90 = c91 = ca0 = ca1 = cb0 = cb1 = _mm512_setzero_ps();
  }
  const float* a0 = a;
  const float* a1 = a + rs;
  const float* a2 = a + 2 * rs;
  const float* a3 = a + 3 * rs;
  const float* a4 = a + 4 * rs;
  const float* a5 = a + 5 * rs;
  const float* a6 = a + 6 * rs;
  const float* a7 = a + 7 * rs;
  const float* a8 = a + 8 * rs;
  const float* a9 = a + 9 * rs;
  const float* aa = a + 10 * rs;
  const float* ab = a + 11 * rs;
  for (std::int64_t kk = 0; kk < k; ++kk) {
    const std::int64_t o = kUnitCol ? kk : kk * cs;
    const __m512 b0 = _mm512_loadu_ps(b + kk * kNr);
    const __m512 b1 = _mm512_loadu_ps(b + kk * kNr + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + (kk + kPrefetchK) * kNr), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + (kk + kPrefetchK) * kNr + 16), _MM_HINT_T0);
    __m512 x;
#define RAGDOT_FMA_ROW(ap, acc0, acc1) \
  x = _mm512_set1_ps(ap[o]);           \
  acc0 = _mm512_fmadd_ps(x, b0, acc0); \
  acc1 = _mm512_fmadd_ps(x, b1, acc1);
    RAGDOT_FMA_ROW(a0, c00, c01)
    RAGDOT_FMA_ROW(a1, c10, c11)
    RAGDOT_FMA_ROW(a2, c20, c21)
    RAGDOT_FMA_ROW(a3, c30, c31)
    RAGDOT_FMA_ROW(a4, c40, c41)
    RAGDOT_FMA_ROW(a5, c50, c51)
    RAGDOT_FMA_ROW(a6, c60, c61)
    RAGDOT_FMA_ROW(a7, c70, c71)
    RAGDOT_FMA_ROW(a8, c80, c81)
    RAGDOT_FMA_ROW(a9, c90, c91)
    RAGDOT_FMA_ROW(aa, ca0, ca1)
    RAGDOT_FMA_ROW(ab, cb0, cb1)
#undef RAGDOT_FMA_ROW
  }
  _mm512_storeu_ps(c + 0 * ldc, c00);
  _mm512_storeu_ps(c + 0 * ldc + 16, c01);
  _mm512_storeu_ps(c + 1 * ldc, c10);
  _mm512_storeu_ps(c + 1 * ldc + 16, c11);
  _mm512_storeu_ps(c + 2 * ldc, c20);
  _mm512_storeu_ps(c + 2 * ldc + 16, c21);
  _mm512_storeu_ps(c + 3 * ldc, c30);
  _mm512_storeu_ps(c + 3 * ldc + 16, c31);
  _mm512_storeu_ps(c + 4 * ldc, c40);
  _mm512_storeu_ps(c + 4 * ldc + 16, c41);
  _mm512_storeu_ps(c + 5 * ldc, c50);
  _mm512_storeu_ps(c + 5 * ldc + 16, c51);
  _mm512_storeu_ps(c + 6 * ldc, c60);
  _mm512_storeu_ps(c + 6 * ldc + 16, c61);
  _mm512_storeu_ps(c + 7 * ldc, c70);
  _mm512_storeu_ps(c + 7 * ldc + 16, c71);
  _mm512_storeu_ps(c + 8 * ldc, c80);
  _mm512_storeu_ps(c + 8 * ldc + 16, c81);
  _mm512_storeu_ps(c + 9 * ldc, c90);
  _mm512_storeu_ps(c + 9 * ldc + 16, c91);
  _mm512_storeu_ps(c + 10 * ldc, ca0);
  _mm512_storeu_ps(c + 10 * ldc + 16, ca1);
  _mm512_storeu_ps(c + 11 * ldc, cb0);
  _mm512_storeu_ps(c + 11 * ldc + 16, cb1);
}

void compute(const void* a, std::int64_t rs, std::int64_t cs, const void* panel, std::int64_t k, std::int64_t nb,
             float* c, bool accumulate, PanelJob* job) {
  const float* A = static_cast<const float*>(a);
  const float* P = static_cast<const float*>(panel);
  // the next panel's packing is spread over the gaps between blocks
  Pacer<pack_rows> pacer(job, nb / kNr, 1);
  for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
    if (cs == 1) {
      block_12x32<true>(A, rs, 1, P + j0 * k, k, c + j0, nb, accumulate);
    } else {
      block_12x32<false>(A, rs, cs, P + j0 * k, k, c + j0, nb, accumulate);
    }
    pacer.step();
  }
}

}  // namespace

const IsaKernels& avx512_f32_kernels() {
  static const IsaKernels k{"avx512-f32", kMr, kNr, 1, 1, 4, 4, 512 * 1024, 1024, no_thread_setup, fence_streaming_stores, pack_b, a_direct, pack_a, compute, store_c, zero_c};
  return k;
}

}  // namespace ragdot::cpu::kernels
