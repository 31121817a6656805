// The per-group GEMMs of a canonical problem in the column-major terms of cuBLAS, built on the host
// from the group bounds. Row-major results are computed as C^T = B^T A^T; every operand is read in
// place, with a transpose flag where it is contiguous along its other dim. Plain C++ (no cuBLAS
// types) so that the mapping is tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/problem.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cublas {

// How cuBLAS reads a logical rows x cols matrix: element (i, j) is at i + j * ld, or with
// `transpose` at j + i * ld.
struct ColumnMajorView {
  bool transpose = false;
  std::int64_t ld = 1;
};

// The view of a rows x cols matrix with element strides, or nullopt when neither dim is
// contiguous (strides of dims of size 1 do not matter).
std::optional<ColumnMajorView> column_major_view(std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                                                 std::int64_t col_stride);

enum class Source : std::uint8_t { kLhs, kRhs };

// C (m x n, ldc) = op(A) (m x k) * op(B) (k x n), column-major; offsets in elements.
struct ColumnMajorGemm {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0, lda = 1, ldb = 1, ldc = 1;
  Source a_source = Source::kRhs, b_source = Source::kLhs;
  std::int64_t a_offset = 0, b_offset = 0, c_offset = 0;
};

// A logical strided part of the output to set to zero (rows no group covers, empty groups).
struct ZeroBlock {
  std::int64_t offset = 0, rows = 0, cols = 0, row_stride = 0, col_stride = 0;
};

// The same block as a pitched 2D memset: `height` runs of `width` contiguous elements, `pitch`
// elements apart. nullopt when neither dim is contiguous.
struct PitchedRegion {
  std::int64_t offset = 0, width = 0, height = 0, pitch = 0;
};
std::optional<PitchedRegion> pitched_region(const ZeroBlock& z);

// Out (rows x cols, strides) = A (rows x depth) * B (depth x cols) as one column-major GEMM, or
// nullopt when cuBLAS cannot read some operand in place.
struct StridedMatrix {
  std::int64_t row_stride = 0, col_stride = 0;
};
std::optional<ColumnMajorGemm> map_gemm(std::int64_t rows, std::int64_t cols, std::int64_t depth, StridedMatrix a,
                                        StridedMatrix b, StridedMatrix out);

struct GemmList {
  std::vector<ColumnMajorGemm> gemms;
  std::vector<ZeroBlock> zeros;
};

// Whether the cublas backend takes the problem (plain strides, no relayout, no reduce dims).
Status check_mappable(const core::GroupGemmProblem& p);

// Upper bounds of the list sizes, for storage reserved at plan time.
std::int64_t max_gemms(const core::GroupGemmProblem& p);
std::int64_t max_zero_blocks(const core::GroupGemmProblem& p);

// Fills `list` (cleared first; within the reserved sizes it does not allocate) from the group
// starts of every group-size row (rows * (num_groups + 1) entries, as core::compute_group_starts
// writes them; unused in mode 3) and the group offset.
Status build_gemm_list(const core::GroupGemmProblem& p, const std::int64_t* starts, std::int64_t group_offset,
                       GemmList& list);

}  // namespace ragdot::cublas
