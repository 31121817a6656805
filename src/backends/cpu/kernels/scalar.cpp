// Portable kernels: plain C++ with f32 accumulation. Used where AVX-512 is missing, and as the
// shared element loaders/stores of the packing code.
#include <cstring>

#include "backends/cpu/kernels/kernels.hpp"
#include "core/half.hpp"

namespace ragdot::cpu::kernels {

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

namespace {

constexpr int kMr = 4;
constexpr int kNr = 16;

float load(const void* base, DType dt, std::int64_t i) {
  switch (dt) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, static_cast<const char*>(base) + i * 4, 4);
      return f;
    }
    case DType::kBF16: {
      std::uint16_t h;
      std::memcpy(&h, static_cast<const char*>(base) + i * 2, 2);
      return core::bf16_to_f32(h);
    }
    case DType::kF16: {
      std::uint16_t h;
      std::memcpy(&h, static_cast<const char*>(base) + i * 2, 2);
      return core::f16_to_f32(h);
    }
    default: return 0.0f;
  }
}

void put(void* base, DType dt, std::int64_t i, float v) {
  switch (dt) {
    case DType::kF32: std::memcpy(static_cast<char*>(base) + i * 4, &v, 4); break;
    case DType::kBF16: {
      std::uint16_t h = core::f32_to_bf16(v);
      std::memcpy(static_cast<char*>(base) + i * 2, &h, 2);
      break;
    }
    case DType::kF16: {
      std::uint16_t h = core::f32_to_f16(v);
      std::memcpy(static_cast<char*>(base) + i * 2, &h, 2);
      break;
    }
    default: break;
  }
}

void noop() {}

// Panel: [nb / kNr][k][kNr] f32. Packs k rows [job.next, job.limit).
void pack_b(PanelJob& job) {
  const MatrixView& b = job.b;
  float* p = static_cast<float*>(job.panel);
  for (std::int64_t j0 = 0; j0 < job.nb; j0 += kNr) {
    float* sub = p + j0 * job.k;
    for (std::int64_t kk = job.next; kk < job.limit; ++kk) {
      for (int j = 0; j < kNr; ++j) {
        const std::int64_t col = j0 + j;
        sub[kk * kNr + j] = col < job.n ? load(b.data, b.dtype, kk * b.row_stride + col * b.col_stride) : 0.0f;
      }
    }
  }
  job.next = job.limit;
}

bool a_direct(MatrixView, std::int64_t) { return false; }

StripStrides pack_a(MatrixView a, std::int64_t rows, std::int64_t k, void* strip) {
  float* s = static_cast<float*>(strip);
  for (int r = 0; r < kMr; ++r) {
    for (std::int64_t kk = 0; kk < k; ++kk) {
      s[r * k + kk] = r < rows ? load(a.data, a.dtype, r * a.row_stride + kk * a.col_stride) : 0.0f;
    }
  }
  return {k, 1};
}

void compute(const void* a, std::int64_t ars, std::int64_t acs, const void* panel, std::int64_t k, std::int64_t nb,
             float* c, bool accumulate, PanelJob*) {
  const float* A = static_cast<const float*>(a);
  for (std::int64_t j0 = 0; j0 < nb; j0 += kNr) {
    const float* B = static_cast<const float*>(panel) + j0 * k;
    float acc[kMr][kNr] = {};
    if (accumulate) {
      for (int r = 0; r < kMr; ++r) std::memcpy(acc[r], c + r * nb + j0, sizeof(acc[r]));
    }
    for (std::int64_t kk = 0; kk < k; ++kk) {
      for (int r = 0; r < kMr; ++r) {
        const float av = A[r * ars + kk * acs];
        for (int j = 0; j < kNr; ++j) acc[r][j] += av * B[kk * kNr + j];
      }
    }
    for (int r = 0; r < kMr; ++r) std::memcpy(c + r * nb + j0, acc[r], sizeof(acc[r]));
  }
}

void store(const float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, OutView out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < cols; ++j) put(out.data, out.dtype, r * out.row_stride + j * out.col_stride, c[r * ldc + j]);
  }
}

void zero(std::int64_t rows, std::int64_t cols, OutView out) {
  if (rows <= 0 || cols <= 0) return;  // an empty block: out.data may be null
  const std::size_t es = dtype_size(out.dtype);
  for (std::int64_t r = 0; r < rows; ++r) {
    char* row = static_cast<char*>(out.data) + r * out.row_stride * std::int64_t(es);
    if (out.col_stride == 1) {
      std::memset(row, 0, std::size_t(cols) * es);
    } else {
      for (std::int64_t j = 0; j < cols; ++j) std::memset(row + j * out.col_stride * std::int64_t(es), 0, es);
    }
  }
}

}  // namespace

const IsaKernels& scalar_kernels() {
  static const IsaKernels k{"scalar", kMr, kNr, 1, 1, 4, 4, 256 * 1024, 256, noop, noop, pack_b, a_direct, pack_a, compute, store, zero};
  return k;
}

}  // namespace ragdot::cpu::kernels
