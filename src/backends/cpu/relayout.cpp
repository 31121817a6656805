#include "backends/cpu/relayout.hpp"

#include <cstring>
#include <vector>

namespace ragdot::cpu {

namespace {

// dst[rows x cols] (row stride cols) = src element (i, j) at i * s0 + j * s1, in 32 x 32 blocks so
// that both sides stay in cache when the source is transposed.
template <class T>
void copy2d(const T* src, std::int64_t rows, std::int64_t cols, std::int64_t s0, std::int64_t s1, T* dst) {
  if (s1 == 1) {
    for (std::int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * cols, src + i * s0, std::size_t(cols) * sizeof(T));
    return;
  }
  constexpr std::int64_t kB = 32;
  for (std::int64_t i0 = 0; i0 < rows; i0 += kB) {
    const std::int64_t i1 = i0 + kB < rows ? i0 + kB : rows;
    for (std::int64_t j0 = 0; j0 < cols; j0 += kB) {
      const std::int64_t j1 = j0 + kB < cols ? j0 + kB : cols;
      for (std::int64_t j = j0; j < j1; ++j) {
        for (std::int64_t i = i0; i < i1; ++i) dst[i * cols + j] = src[i * s0 + j * s1];
      }
    }
  }
}

template <class T>
void relayout_t(const T* src, const core::Relayout& r, T* dst, int threads) {
  const std::size_t nd = r.sizes.size();
  if (nd == 0) {
    dst[0] = src[0];
    return;
  }
  for (auto s : r.sizes) {
    if (s == 0) return;
  }
  const std::int64_t cols = r.sizes[nd - 1];
  const std::int64_t rows = nd >= 2 ? r.sizes[nd - 2] : 1;
  const std::int64_t s1 = r.src_strides[nd - 1];
  const std::int64_t s0 = nd >= 2 ? r.src_strides[nd - 2] : 0;
  std::int64_t outer = 1;
  for (std::size_t d = 0; d + 2 < nd; ++d) outer *= r.sizes[d];
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t rem = o, off = 0;
    for (std::int64_t d = std::int64_t(nd) - 3; d >= 0; --d) {
      off += (rem % r.sizes[std::size_t(d)]) * r.src_strides[std::size_t(d)];
      rem /= r.sizes[std::size_t(d)];
    }
    copy2d(src + off, rows, cols, s0, s1, dst + o * rows * cols);
  }
}

}  // namespace

void relayout(const void* src, std::size_t elem_bytes, const core::Relayout& r, void* dst, int threads) {
  switch (elem_bytes) {
    case 2: relayout_t(static_cast<const std::uint16_t*>(src), r, static_cast<std::uint16_t*>(dst), threads); break;
    case 4: relayout_t(static_cast<const std::uint32_t*>(src), r, static_cast<std::uint32_t*>(dst), threads); break;
    case 8: relayout_t(static_cast<const std::uint64_t*>(src), r, static_cast<std::uint64_t*>(dst), threads); break;
    default: break;
  }
}

void gather_rows(const void* table, std::int64_t table_rows, std::size_t row_bytes, const std::int32_t* index,
                 std::int64_t rows, void* dst) {
  auto* to = static_cast<unsigned char*>(dst);
  const auto* from = static_cast<const unsigned char*>(table);
  for (std::int64_t i = 0; i < rows; ++i, to += row_bytes) {
    const std::int64_t r = index[i];
    if (r < 0 || r >= table_rows) std::memset(to, 0, row_bytes);
    else std::memcpy(to, from + std::size_t(r) * row_bytes, row_bytes);
  }
}

}  // namespace ragdot::cpu
