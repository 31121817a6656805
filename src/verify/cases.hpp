// Random and explicit ragged-dot cases for tests and `ragdot verify`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ragdot/op.hpp"
#include "ragdot/workloads.hpp"

namespace ragdot::verify {

struct Case {
  RaggedDotSpec spec;
  std::vector<std::int64_t> group_sizes;  // flattened like the group_sizes tensor
  std::optional<std::int32_t> group_offset;
  std::string description;
  // Gathered lhs (PlanOptions::lhs_gather_rows; mode 1, lhs [M, K], or mode 2, lhs [K, M]): when
  // lhs_rows is not empty, execute gets a table of lhs_table_rows random rows and this int32 index
  // into it, one entry per lhs row (indices outside the table read zeros); the oracle gets the
  // gathered rows as a plain lhs.
  std::vector<std::int32_t> lhs_rows;
  std::int64_t lhs_table_rows = 0;
  // The SwiGLU epilogue (PlanOptions::swiglu_epilogue; mode 1, out [M, N]): the plan writes the
  // [M, N / 2] activation of the product's [gate | up] halves, checked against the oracle's
  // product through cpu::swiglu_of_stored.
  bool swiglu = false;
  // The scatter-add of output rows (PlanOptions::out_scatter_rows; mode 1, out [M, N]): when
  // out_rows is not empty, execute adds row i of the product, rounded to the output dtype, times
  // row_scales[i], into row out_rows[i] of an f32 table of out_table_rows rows that starts with
  // random values; the check sums the same in float64 (the order of the additions is not fixed,
  // so the case runs once, not `repeats` times).
  std::vector<std::int32_t> out_rows;
  std::vector<float> row_scales;
  std::int64_t out_table_rows = 0;
  // Scattered cases at a layer's scale: the float64 sums are made and compared for every
  // table_row_stride-th table row only (each costs its rows' k-long dots); the others must not be NaN.
  std::int64_t table_row_stride = 1;
};

// Patterns of group sizes a backend must get right.
enum class GroupPattern : std::uint8_t {
  kRandom,       // random split with zeros and odd sizes
  kZeros,        // many empty groups
  kAllInOne,     // every row in one group
  kPartialSum,   // sum < extent (a tail that no group covers)
  kAllEmpty,     // sum == 0
  kUniform,      // equal sizes (as far as they divide)
  kPrimes,       // odd, prime sizes
};
const char* group_pattern_name(GroupPattern p);

// `count` sizes summing to at most `extent` following `pattern`.
std::vector<std::int64_t> make_group_sizes(GroupPattern pattern, std::int64_t count, std::int64_t extent,
                                           workloads::SplitMix64& rng);

struct CaseOptions {
  int mode = 0;                 // 1, 2, 3, or 0 for any
  std::optional<DType> dtype;   // operands; unset: random among f32, bf16, f16
  bool general_dims = true;     // batch dims, several m/k/n dims, permuted axes
  std::int64_t max_dim = 40;    // upper bound of random sizes
  bool allow_group_offset = true;
};

// A random valid case; the same seed always gives the same case.
Case random_case(std::uint64_t seed, const CaseOptions& options);

// The plain MoE forms: mode 1 lhs [m,k], rhs [g,k,n]; mode 2 lhs [k,m], rhs [k,n] -> [g,m,n];
// mode 3 lhs [b,m,k], rhs [b,k,n] with group sizes over b.
Result<Case> shaped_case(int mode, std::int64_t m, std::int64_t k, std::int64_t n,
                         const std::vector<std::int64_t>& group_sizes, DType dtype,
                         std::optional<DType> out_dtype = std::nullopt);

// Mode 1 with a batch dim in front: lhs [batches, m, k], rhs [batches, groups, k, n], group sizes
// [groups] shared by every batch index (int32). Only the spec: for planning, not for running.
RaggedDotSpec batched_forward_spec(std::int64_t batches, std::int64_t m, std::int64_t k, std::int64_t n,
                                   std::int64_t groups, DType dtype);

// Plain MoE forms with an empty dimension: no rows (m = 0), no columns (n = 0), an empty
// contraction (k = 0: the output is all zeros), in modes 1 and 2 (mode 2's k is the token rows).
std::vector<Case> empty_dimension_cases(DType dtype);

}  // namespace ragdot::verify
