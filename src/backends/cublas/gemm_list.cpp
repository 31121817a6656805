#include "backends/cublas/gemm_list.hpp"

#include <algorithm>
#include <climits>
#include <string>

namespace ragdot::cublas {

std::optional<ColumnMajorView> column_major_view(std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                                                 std::int64_t col_stride) {
  const std::int64_t min_ld_plain = std::max<std::int64_t>(rows, 1), min_ld_trans = std::max<std::int64_t>(cols, 1);
  if (rows <= 0 || cols <= 0) return ColumnMajorView{false, min_ld_plain};
  // plain: element (i, j) at i + j * ld; the one column of a vector needs no real ld
  if (rows == 1 || row_stride == 1) {
    const std::int64_t ld = cols == 1 ? min_ld_plain : col_stride;
    if (ld >= min_ld_plain) return ColumnMajorView{false, ld};
  }
  // transposed: element (i, j) at j + i * ld
  if (cols == 1 || col_stride == 1) {
    const std::int64_t ld = rows == 1 ? min_ld_trans : row_stride;
    if (ld >= min_ld_trans) return ColumnMajorView{true, ld};
  }
  return std::nullopt;
}

std::optional<PitchedRegion> pitched_region(const ZeroBlock& z) {
  if (z.rows <= 0 || z.cols <= 0) return PitchedRegion{z.offset, 0, 0, 1};
  if (z.cols == 1 || z.col_stride == 1) {
    const std::int64_t pitch = z.rows == 1 ? z.cols : z.row_stride;
    if (pitch >= z.cols) return PitchedRegion{z.offset, z.cols, z.rows, pitch};
  }
  if (z.rows == 1 || z.row_stride == 1) {
    const std::int64_t pitch = z.cols == 1 ? z.rows : z.col_stride;
    if (pitch >= z.rows) return PitchedRegion{z.offset, z.rows, z.cols, pitch};
  }
  return std::nullopt;
}

std::optional<ColumnMajorGemm> map_gemm(std::int64_t rows, std::int64_t cols, std::int64_t depth, StridedMatrix a,
                                        StridedMatrix b, StridedMatrix out) {
  // Output contiguous along its columns (row-major): cuBLAS computes C^T = B^T A^T.
  if (auto c = column_major_view(cols, rows, out.col_stride, out.row_stride); c && !c->transpose) {
    auto va = column_major_view(cols, depth, b.col_stride, b.row_stride);
    auto vb = column_major_view(depth, rows, a.col_stride, a.row_stride);
    if (va && vb) {
      return ColumnMajorGemm{va->transpose, vb->transpose, cols, rows, depth, va->ld, vb->ld, c->ld,
                             Source::kRhs, Source::kLhs, 0, 0, 0};
    }
  }
  // Output contiguous along its rows (column-major): C = A B as it is.
  if (auto c = column_major_view(rows, cols, out.row_stride, out.col_stride); c && !c->transpose) {
    auto va = column_major_view(rows, depth, a.row_stride, a.col_stride);
    auto vb = column_major_view(depth, cols, b.row_stride, b.col_stride);
    if (va && vb) {
      return ColumnMajorGemm{va->transpose, vb->transpose, rows, cols, depth, va->ld, vb->ld, c->ld,
                             Source::kLhs, Source::kRhs, 0, 0, 0};
    }
  }
  return std::nullopt;
}

namespace {

// Element offsets of one outer index into each operand (and into the group sizes).
struct OuterOffsets {
  std::int64_t lhs = 0, rhs = 0, out = 0, gs = 0;
};

OuterOffsets outer_offsets(const core::GroupGemmProblem& p, std::int64_t index) {
  OuterOffsets o;
  for (std::size_t d = p.outer.size(); d-- > 0;) {
    const std::int64_t i = index % p.outer[d].size;
    index /= p.outer[d].size;
    o.lhs += i * p.outer[d].lhs;
    o.rhs += i * p.outer[d].rhs;
    o.out += i * p.outer[d].out;
    o.gs += i * p.outer[d].gs;
  }
  return o;
}

StridedMatrix lhs_of(const core::GroupGemmProblem& p) { return {p.lhs_m, p.lhs_k}; }
StridedMatrix rhs_of(const core::GroupGemmProblem& p) { return {p.rhs_k, p.rhs_n}; }
StridedMatrix out_of(const core::GroupGemmProblem& p) { return {p.out_m, p.out_n}; }

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

// Adds out (rows x n) = lhs (rows x depth) * rhs (depth x n) at the given element offsets, or a
// zero block when depth is 0 (an empty group of mode 2, or k = 0).
Status add_gemm(const core::GroupGemmProblem& p, std::int64_t rows, std::int64_t depth, std::int64_t lhs_offset,
                std::int64_t rhs_offset, std::int64_t out_offset, GemmList& list) {
  if (rows <= 0 || p.n <= 0) return Status::ok();
  if (depth <= 0) {
    list.zeros.push_back({out_offset, rows, p.n, p.out_m, p.out_n});
    return Status::ok();
  }
  auto g = map_gemm(rows, p.n, depth, lhs_of(p), rhs_of(p), out_of(p));
  if (!g) return internal_error("cublas: a group GEMM has strides cuBLAS cannot read in place");
  g->a_offset = g->a_source == Source::kLhs ? lhs_offset : rhs_offset;
  g->b_offset = g->b_source == Source::kLhs ? lhs_offset : rhs_offset;
  g->c_offset = out_offset;
  list.gemms.push_back(*g);
  return Status::ok();
}

void add_zero_rows(const core::GroupGemmProblem& p, std::int64_t first_row, std::int64_t rows, std::int64_t out_offset,
                   GemmList& list) {
  if (rows > 0 && p.n > 0) list.zeros.push_back({out_offset + first_row * p.out_m, rows, p.n, p.out_m, p.out_n});
}

}  // namespace

Status check_mappable(const core::GroupGemmProblem& p) {
  if (p.needs_relayout()) return unsupported("cublas reads operands in place; this op needs a relayout");
  if (!p.reduce.empty()) return unsupported("cublas does not take group sizes that vary along a contracted dim");
  const std::int64_t values[] = {p.m, p.n, p.k, p.lhs_m, p.lhs_k, p.rhs_k, p.rhs_n, p.out_m, p.out_n};
  for (std::int64_t v : values) {
    if (!fits_int(v)) return unsupported("cublas: a dimension or stride exceeds the 32-bit range of the grouped API");
  }
  // The grouped API counts its GEMMs in an int, and the plan keeps host arrays of that many.
  const std::int64_t per_outer = p.gemms_per_outer();
  if (!fits_int(per_outer) || !fits_int(p.outer_count()) || !fits_int(per_outer * p.outer_count())) {
    return unsupported("cublas: " + std::to_string(p.outer_count()) + " batch indices x " + std::to_string(per_outer) +
                       " groups exceed the 32-bit GEMM count of the grouped API");
  }
  // Every ragged size the plan may meet maps the same way as these: 1, 2 and the whole extent.
  const std::int64_t full = p.mode == RaggedMode::kContracting ? p.k : p.m;
  for (std::int64_t ragged : {std::int64_t(1), std::int64_t(2), full}) {
    if (ragged > full || ragged <= 0) continue;
    const std::int64_t rows = p.mode == RaggedMode::kContracting ? p.m : ragged;
    const std::int64_t depth = p.mode == RaggedMode::kContracting ? ragged : p.k;
    if (rows <= 0 || p.n <= 0) continue;
    if (depth > 0 && !map_gemm(rows, p.n, depth, lhs_of(p), rhs_of(p), out_of(p))) {
      return unsupported("cublas: an operand is contiguous along neither of its dims");
    }
    if (!pitched_region({0, rows, p.n, p.out_m, p.out_n})) {
      return unsupported("cublas: the output is contiguous along neither of its dims");
    }
  }
  return Status::ok();
}

// (check_mappable keeps it within an int)
std::int64_t max_gemms(const core::GroupGemmProblem& p) { return p.outer_count() * p.gemms_per_outer(); }

std::int64_t max_zero_blocks(const core::GroupGemmProblem& p) {
  const std::int64_t per_outer = p.mode == RaggedMode::kNonContracting ? p.computed_groups + 2
                                 : p.mode == RaggedMode::kContracting ? std::max<std::int64_t>(p.computed_groups, 1)
                                                                       : 1;
  return p.outer_count() * per_outer;
}

Status build_gemm_list(const core::GroupGemmProblem& p, const std::int64_t* starts, std::int64_t group_offset,
                       GemmList& list) {
  list.gemms.clear();
  list.zeros.clear();
  const std::int64_t unit = p.ragged_unit, L = p.computed_groups;
  for (std::int64_t oi = 0; oi < p.outer_count(); ++oi) {
    const OuterOffsets o = outer_offsets(p, oi);
    const std::int64_t row = p.num_groups > 0 ? o.gs / p.num_groups : 0;
    const std::int64_t* rs = starts ? starts + row * (p.num_groups + 1) + group_offset : nullptr;
    switch (p.mode) {
      case RaggedMode::kNonContracting: {
        // rows ahead of the first computed group and past the last one are zero
        const std::int64_t first = L ? rs[0] * unit : 0, last = L ? rs[L] * unit : 0;
        add_zero_rows(p, 0, first, o.out, list);
        add_zero_rows(p, last, p.m - last, o.out, list);
        for (std::int64_t j = 0; j < L; ++j) {
          const std::int64_t s = rs[j] * unit, e = rs[j + 1] * unit;
          RAGDOT_RETURN_IF_ERROR(
              add_gemm(p, e - s, p.k, o.lhs + s * p.lhs_m, o.rhs + j * p.rhs_g, o.out + s * p.out_m, list));
        }
        break;
      }
      case RaggedMode::kContracting:
        // dW[j] = lhs[:, s:e] * rhs[s:e, :], read in place; an empty group's block is zero
        for (std::int64_t j = 0; j < L; ++j) {
          const std::int64_t s = rs[j] * unit, e = rs[j + 1] * unit;
          RAGDOT_RETURN_IF_ERROR(
              add_gemm(p, p.m, e - s, o.lhs + s * p.lhs_k, o.rhs + s * p.rhs_k, o.out + j * p.out_g, list));
        }
        break;
      case RaggedMode::kBatch:
        RAGDOT_RETURN_IF_ERROR(add_gemm(p, p.m, p.k, o.lhs, o.rhs, o.out, list));
        break;
    }
  }
  return Status::ok();
}

}  // namespace ragdot::cublas
