// AMX-BF16 kernels: 32 x 32 C blocks held in four tile registers (2 x 2 of 16 x 16 f32), A and B
// streamed through two tiles each, one TDPBF16PS per (A tile, B tile) pair and 32-wide k step.
// B is packed as 1 KiB tiles of 16 k-pairs x 16 columns; A is read in place when it is bf16 with
// contiguous k that is a multiple of 32 (the usual [tokens, hidden] activations).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels/kernels.hpp"

namespace ragdot::cpu::kernels {

namespace {

#include "backends/cpu/kernels/avx512_common.inc"

constexpr int kMr = 32;
constexpr int kNr = 32;
constexpr int kKb = 32;            // k per tile step
constexpr int kTileElems = 512;    // 16 rows x 32 bf16
constexpr int kPrefetchRows = 16;  // software prefetch distance when packing B

struct alignas(64) TileConfig {
  std::uint8_t palette_id;
  std::uint8_t start_row;
  std::uint8_t reserved[14];
  std::uint16_t colsb[16];
  std::uint8_t rows[16];
};

// Eight 16 x 64-byte tiles. A constant object: GCC drops stores into a stack copy that it does
// not see ldtilecfg read, leaving the tiles unconfigured.
constexpr TileConfig kTileConfig = {1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

void thread_begin() { _tile_loadconfig(&kTileConfig); }

void thread_end() {
  _tile_release();
  _mm_sfence();  // streaming stores of store_c
}

inline std::int64_t padk(std::int64_t k) { return (k + kKb - 1) / kKb * kKb; }

// Interleaving rows k and k+1 of 32 columns into two tile rows (columns 0-15 and 16-31, each as
// [col][pair]): unpack within 128-bit lanes, then put the lanes in column order with one
// two-source qword permute per output (4 shuffle uops in all, not 6 with word permutes).
alignas(64) const std::int64_t kLanesLo[8] = {0, 1, 8, 9, 2, 3, 10, 11};
alignas(64) const std::int64_t kLanesHi[8] = {4, 5, 12, 13, 6, 7, 14, 15};

// Panel: [nb / 16][kp / 32] tiles; tile row p holds k-pair (2p, 2p+1) of 16 columns, interleaved.
// Packs k rows [job.next, end) (even bounds) and advances job.next.
void pack_rows(PanelJob& job, std::int64_t end) {
  const MatrixView& b = job.b;
  const std::int64_t k = job.k, n = job.n, nb = job.nb;
  std::uint16_t* panel = static_cast<std::uint16_t*>(job.panel);
  const std::uint16_t* src = static_cast<const std::uint16_t*>(b.data);
  const std::int64_t kblocks = padk(k) / kKb;
  auto tile = [&](std::int64_t n16, std::int64_t kb) { return panel + (n16 * kblocks + kb) * kTileElems; };
  if (b.col_stride == 1) {
    const __m512i lanes_lo = _mm512_load_si512(kLanesLo), lanes_hi = _mm512_load_si512(kLanesHi);
    for (std::int64_t k0 = job.next; k0 < end; k0 += 2) {
      const std::int64_t kb = k0 / kKb, pr = (k0 % kKb) / 2;
      const std::uint16_t* row0 = src + k0 * b.row_stride;
      const std::uint16_t* row1 = row0 + b.row_stride;
      // Rows sit a page or more apart, so the hardware prefetcher sees no stream: fetch the rows
      // kPrefetchRows ahead by hand to keep enough misses in flight.
      if (k0 + kPrefetchRows + 1 < k) {
        const char* p0 = reinterpret_cast<const char*>(row0 + kPrefetchRows * b.row_stride);
        const char* p1 = p0 + b.row_stride * 2;
        for (std::int64_t off = 0; off < n * 2; off += 64) {
          _mm_prefetch(p0 + off, _MM_HINT_T0);
          _mm_prefetch(p1 + off, _MM_HINT_T0);
        }
      }
      for (std::int64_t j0 = 0; j0 < nb; j0 += 32) {
        const std::int64_t valid = n - j0 < 0 ? 0 : (n - j0 > 32 ? 32 : n - j0);
        const __mmask32 m = valid >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << valid) - 1u);
        const __m512i r0 = k0 < k ? _mm512_maskz_loadu_epi16(m, row0 + j0) : _mm512_setzero_si512();
        const __m512i r1 = k0 + 1 < k ? _mm512_maskz_loadu_epi16(m, row1 + j0) : _mm512_setzero_si512();
        const __m512i lo = _mm512_unpacklo_epi16(r0, r1), hi = _mm512_unpackhi_epi16(r0, r1);
        _mm512_store_si512(tile(j0 / 16, kb) + pr * 32, _mm512_permutex2var_epi64(lo, lanes_lo, hi));
        _mm512_store_si512(tile(j0 / 16 + 1, kb) + pr * 32, _mm512_permutex2var_epi64(lo, lanes_hi, hi));
      }
    }
  } else {
    // Transposed source (k contiguous per column, e.g. [n, k] weights).
    for (std::int64_t kk = job.next; kk < end; ++kk) {
      for (std::int64_t j = 0; j < nb; ++j) {
        const bool in = kk < k && j < n;
        tile(j / 16, kk / kKb)[((kk % kKb) / 2) * 32 + (j % 16) * 2 + (kk & 1)] =
            in ? src[kk * b.row_stride + j * b.col_stride] : 0;
      }
    }
  }
  job.next = end;
}

void pack_b(PanelJob& job) { pack_rows(job, job.limit); }

bool a_direct(MatrixView a, std::int64_t k) { return a.dtype == DType::kBF16 && a.col_stride == 1 && k % kKb == 0; }

StripStrides pack_a(MatrixView a, std::int64_t rows, std::int64_t k, void* strip) {
  std::uint16_t* s = static_cast<std::uint16_t*>(strip);
  const std::uint16_t* src = static_cast<const std::uint16_t*>(a.data);
  const std::int64_t kp = padk(k);
  for (int r = 0; r < kMr; ++r) {
    std::uint16_t* dst = s + r * kp;
    if (r >= rows) {
      std::memset(dst, 0, std::size_t(kp) * 2);
      continue;
    }
    if (a.col_stride == 1) {
      std::memcpy(dst, src + r * a.row_stride, std::size_t(k) * 2);
      std::memset(dst + k, 0, std::size_t(kp - k) * 2);
    } else {
      for (std::int64_t kk = 0; kk < kp; ++kk) dst[kk] = kk < k ? src[r * a.row_stride + kk * a.col_stride] : 0;
    }
  }
  return {kp, 1};
}

void compute(const void* a, std::int64_t rs, std::int64_t, const void* panel, std::int64_t k, std::int64_t nb,
             float* c, bool accumulate, PanelJob* job) {
  const std::int64_t kp = padk(k);
  const std::int64_t kblocks = kp / kKb;
  Pacer<pack_rows> pacer(job, (nb / kNr) * kblocks, 2);
  const std::uint16_t* A0 = static_cast<const std::uint16_t*>(a);
  const std::uint16_t* A1 = A0 + 16 * rs;
  const std::int64_t a_stride = rs * 2;
  const std::uint16_t* P = static_cast<const std::uint16_t*>(panel);
  const std::int64_t c_stride = nb * 4;
  for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
    const std::uint16_t* B0 = P + (j0 / 16) * kblocks * kTileElems;
    const std::uint16_t* B1 = B0 + kblocks * kTileElems;
    if (accumulate) {
      _tile_loadd(0, c + j0, c_stride);
      _tile_loadd(1, c + j0 + 16, c_stride);
      _tile_loadd(2, c + 16 * nb + j0, c_stride);
      _tile_loadd(3, c + 16 * nb + j0 + 16, c_stride);
    } else {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
    }
    for (std::int64_t kb = 0; kb < kblocks; ++kb) {
      _tile_loadd(4, A0 + kb * kKb, a_stride);
      _tile_loadd(6, B0 + kb * kTileElems, 64);
      _tile_loadd(7, B1 + kb * kTileElems, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, A1 + kb * kKb, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
      pacer.step();
    }
    _tile_stored(0, c + j0, c_stride);
    _tile_stored(1, c + j0 + 16, c_stride);
    _tile_stored(2, c + 16 * nb + j0, c_stride);
    _tile_stored(3, c + 16 * nb + j0 + 16, c_stride);
  }
}

}  // namespace

const IsaKernels& amx_bf16_kernels() {
  static const IsaKernels k{"amx-bf16", kMr, kNr, kKb, 2, 2, 2, 128 * 1024, 1024, thread_begin, thread_end, pack_b, a_direct, pack_a, compute, store_c, zero_c};
  return k;
}

}  // namespace ragdot::cpu::kernels
