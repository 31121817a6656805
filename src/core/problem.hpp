// canonicalize: the one shape every backend plans for. Any valid RaggedDot maps onto a
// GroupGemmProblem: outer (batch-like) dims, then per group a GEMM over m x k x n with element
// strides, the ragged dimension being m (mode 1) or k (mode 2). Operands whose dims cannot be
// expressed with one stride per logical dim are marked for a relayout (a copy into a contiguous
// canonical order) instead of being rejected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ragdot/op.hpp"

namespace ragdot::core {

// One outer dimension: the same index steps every operand by its own stride (0 = not indexed).
struct OuterDim {
  std::int64_t size = 1;
  std::int64_t lhs = 0, rhs = 0, out = 0, gs = 0;  // strides in elements (gs: in group_sizes elements)
  bool operator==(const OuterDim&) const = default;
};

// Copy an operand into a contiguous buffer: destination row-major over `sizes`, source element at
// sum(index[i] * src_strides[i]).
struct Relayout {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> src_strides;
  std::int64_t elements() const;
};

struct GroupGemmProblem {
  RaggedMode mode = RaggedMode::kNonContracting;
  DType lhs_dtype = DType::kF32, rhs_dtype = DType::kF32, out_dtype = DType::kF32, gs_dtype = DType::kI32;

  std::int64_t num_groups = 0;       // entries per group_sizes row
  std::int64_t computed_groups = 0;  // groups computed: num_groups, or local_groups with an offset
  bool has_group_offset = false;

  std::vector<OuterDim> outer;   // batch dims (and mode 1's non-contracting dims ahead of the ragged one)
  std::vector<OuterDim> reduce;  // mode 2 only: contracting dims ahead of the ragged one (out stride 0)

  std::int64_t m = 1, n = 1, k = 1;
  std::int64_t ragged_extent = 0;  // size of the ragged dim, in group-size units
  std::int64_t ragged_unit = 1;    // elements of m (mode 1) or k (mode 2) per group-size unit

  // element strides of the per-group GEMM (after any relayout)
  std::int64_t lhs_m = 0, lhs_k = 0;
  std::int64_t rhs_g = 0, rhs_k = 0, rhs_n = 0;
  std::int64_t out_g = 0, out_m = 0, out_n = 0;

  // dense element counts of the operands as the caller passes them
  std::int64_t lhs_elements = 0, rhs_elements = 0, out_elements = 0, gs_elements = 0;

  std::optional<Relayout> lhs_relayout, rhs_relayout;

  // PlanOptions::lhs_gather_rows: lhs is a table of this many rows, read through a row index:
  // mode 1 int32[m] (rows lhs_m apart), mode 2 int32[k] (the contracting rows, lhs_k apart);
  // lhs_elements then counts the table.
  std::optional<std::int64_t> lhs_gather_rows;

  // PlanOptions::swiglu_epilogue: out is the [m, n / 2] activation of the product's [gate | up]
  // halves; out_m is then its row stride (n / 2) and out_elements its size.
  bool swiglu_epilogue = false;

  // PlanOptions::out_scatter_rows: out is an f32 table of this many rows (out_m apart) that row i
  // of the product, rounded to out_dtype and scaled, is added to, at index out_rows[i];
  // out_elements then counts the table.
  std::optional<std::int64_t> out_scatter_rows;
  // The element type of the out buffer: out_dtype, or f32 for a scatter table.
  DType out_buffer_dtype() const { return out_scatter_rows ? DType::kF32 : out_dtype; }

  std::int64_t outer_count() const;
  // The GEMMs of one outer index: one per computed group (at least one), one in mode 3. A plan
  // that lists its GEMMs keeps outer_count() times this many.
  std::int64_t gemms_per_outer() const {
    return mode == RaggedMode::kBatch ? 1 : (computed_groups > 1 ? computed_groups : 1);
  }
  bool needs_relayout() const { return lhs_relayout || rhs_relayout; }
  // The plain MoE forms: no outer/reduce dims, nothing to relayout, m/k/n unit-stride somewhere.
  bool is_single_batch() const { return outer.empty() && reduce.empty(); }
  std::string to_string() const;
};

GroupGemmProblem canonicalize(const RaggedDot& op);

}  // namespace ragdot::core
