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
constexpr int kKb = 32;           // k per tile step
constexpr int kTileElems = 512;   // 16 rows x 32 bf16

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

void thread_end() { _tile_release(); }

inline std::int64_t padk(std::int64_t k) { return (k + kKb - 1) / kKb * kKb; }

alignas(64) const std::uint16_t kLoIdx[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                              8,  40, 9,  41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
alignas(64) const std::uint16_t kHiIdx[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                              24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};

// panel: [nb / 16][kp / 32] tiles; tile row p holds k-pair (2p, 2p+1) of 16 columns, interleaved.
void pack_b(MatrixView b, std::int64_t k, std::int64_t n, std::int64_t nb, void* panel) {
  std::uint16_t* p = static_cast<std::uint16_t*>(panel);
  const std::uint16_t* src = static_cast<const std::uint16_t*>(b.data);
  const std::int64_t kp = padk(k);
  const std::int64_t kblocks = kp / kKb;
  auto tile = [&](std::int64_t n16, std::int64_t kb) { return p + (n16 * kblocks + kb) * kTileElems; };
  if (b.col_stride == 1) {
    const __m512i lo_idx = _mm512_load_si512(kLoIdx), hi_idx = _mm512_load_si512(kHiIdx);
    for (std::int64_t j0 = 0; j0 < nb; j0 += 32) {
      const std::int64_t valid = n - j0 < 0 ? 0 : (n - j0 > 32 ? 32 : n - j0);
      const __mmask32 m = valid >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << valid) - 1u);
      for (std::int64_t kb = 0; kb < kblocks; ++kb) {
        std::uint16_t* t0 = tile(j0 / 16, kb);
        std::uint16_t* t1 = tile(j0 / 16 + 1, kb);
        for (int pr = 0; pr < 16; ++pr) {
          const std::int64_t k0 = kb * kKb + 2 * pr;
          const __m512i r0 = k0 < k ? _mm512_maskz_loadu_epi16(m, src + k0 * b.row_stride + j0) : _mm512_setzero_si512();
          const __m512i r1 = k0 + 1 < k ? _mm512_maskz_loadu_epi16(m, src + (k0 + 1) * b.row_stride + j0) : _mm512_setzero_si512();
          _mm512_store_si512(t0 + pr * 32, _mm512_permutex2var_epi16(r0, lo_idx, r1));
          _mm512_store_si512(t1 + pr * 32, _mm512_permutex2var_epi16(r0, hi_idx, r1));
        }
      }
    }
    return;
  }
  // Transposed source (k contiguous per column, e.g. [n, k] weights).
  for (std::int64_t j = 0; j < nb; ++j) {
    for (std::int64_t kk = 0; kk < kp; ++kk) {
      const bool in = kk < k && j < n;
      tile(j / 16, kk / kKb)[((kk % kKb) / 2) * 32 + (j % 16) * 2 + (kk & 1)] =
          in ? src[kk * b.row_stride + j * b.col_stride] : 0;
    }
  }
}

bool a_direct(MatrixView a, std::int64_t k) { return a.dtype == DType::kBF16 && a.col_stride == 1 && k % kKb == 0; }

std::int64_t pack_a(MatrixView a, std::int64_t rows, std::int64_t k, void* strip) {
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
  return kp;
}

void compute(const void* a, std::int64_t rs, std::int64_t, const void* panel, std::int64_t k, std::int64_t nb,
             float* c) {
  const std::int64_t kp = padk(k);
  const std::int64_t kblocks = kp / kKb;
  const std::uint16_t* A0 = static_cast<const std::uint16_t*>(a);
  const std::uint16_t* A1 = A0 + 16 * rs;
  const std::int64_t a_stride = rs * 2;
  const std::uint16_t* P = static_cast<const std::uint16_t*>(panel);
  const std::int64_t c_stride = nb * 4;
  for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
    const std::uint16_t* B0 = P + (j0 / 16) * kblocks * kTileElems;
    const std::uint16_t* B1 = B0 + kblocks * kTileElems;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (std::int64_t kb = 0; kb < kblocks; ++kb) {
      _tile_loadd(4, A0 + kb * kKb, a_stride);
      _tile_loadd(6, B0 + kb * kTileElems, 64);
      _tile_loadd(7, B1 + kb * kTileElems, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, A1 + kb * kKb, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c + j0, c_stride);
    _tile_stored(1, c + j0 + 16, c_stride);
    _tile_stored(2, c + 16 * nb + j0, c_stride);
    _tile_stored(3, c + 16 * nb + j0 + 16, c_stride);
  }
}

}  // namespace

const IsaKernels& amx_bf16_kernels() {
  static const IsaKernels k{"amx-bf16", kMr,     kNr,     kKb,     2,      2, thread_begin, thread_end,
                            pack_b,     a_direct, pack_a, compute, store_c, zero_c};
  return k;
}

}  // namespace ragdot::cpu::kernels
