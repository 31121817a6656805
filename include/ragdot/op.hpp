// describe: one jax.lax.ragged_dot_general, validated, with its output shape inferred.
//
// The semantics are JAX's (jax.lax.ragged_dot_general), in three modes chosen by where the lhs
// ragged dimension sits:
//   1. ragged non-contracting  [b...,m...,k...] x [g,b...,k...,n...], gs [b...,x...,g] -> [b...,m...,n...]
//   2. ragged contracting      [b...,m...,k...] x [b...,k...,n...],   gs [b...,x...,g] -> [g,b...,m...,n...]
//   3. ragged batch            [b...,m...,k...] x [b...,k...,n...],   gs [x...,g]      -> [b...,m...,n...]
// x... are the lhs dims of the ragged dim's kind that come before it (non-contracting dims in axis
// order for mode 1, contracting dims in list order for mode 2, batch dims in list order for mode 3).
// group_sizes of shape [g] is broadcast over x... as JAX does.
//
// What ragdot guarantees beyond JAX (the same on every backend):
//   - mode 1: output rows that belong to no (computed) group are exactly zero;
//   - mode 2: output blocks of empty groups are exactly zero;
//   - group offset: with `group_offset` set, only the groups [offset, offset + local_groups) are
//     computed, where `offset` is an int32 scalar given at execute time. In mode 1 the rhs group
//     dimension then has local_groups entries; in mode 2 the output's leading dimension does.
//     Rows of the other groups are zero in mode 1. JAX leaves this unimplemented.
//   - mode 3 follows JAX exactly: it equals dot_general, the group sizes only partition the batch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ragdot/status.hpp"
#include "ragdot/tensor.hpp"

namespace ragdot {

struct DotDimensionNumbers {
  std::vector<std::int64_t> lhs_contracting;
  std::vector<std::int64_t> rhs_contracting;
  std::vector<std::int64_t> lhs_batch;
  std::vector<std::int64_t> rhs_batch;
  bool operator==(const DotDimensionNumbers&) const = default;
};

struct RaggedDotDimensionNumbers {
  DotDimensionNumbers dot;
  std::vector<std::int64_t> lhs_ragged;  // exactly one
  std::vector<std::int64_t> rhs_group;   // one in mode 1, none otherwise

  // jax.lax.ragged_dot: lhs [m,k], rhs [g,k,n] -> [m,n].
  static RaggedDotDimensionNumbers ragged_dot();
  bool operator==(const RaggedDotDimensionNumbers&) const = default;
  std::string to_string() const;
};

enum class RaggedMode : std::uint8_t {
  kNonContracting = 1,  // forward: each group of lhs rows meets its own rhs
  kContracting = 2,     // weight gradient: per-group lhs_g^T @ rhs_g
  kBatch = 3,           // ragged batch: dot_general
};

const char* ragged_mode_name(RaggedMode mode);

// Enables the group-offset extension: compute only `local_groups` consecutive groups starting at an
// offset read at execute time (an int32 [1] buffer in the same memory space as group_sizes).
struct GroupOffset {
  std::int64_t local_groups = 0;
  bool operator==(const GroupOffset&) const = default;
};

// Everything static about one ragged_dot_general call.
struct RaggedDotSpec {
  TensorSpec lhs;
  TensorSpec rhs;
  TensorSpec group_sizes;  // int32 or int64, shape [g] or [b...,x...,g]
  RaggedDotDimensionNumbers dims = RaggedDotDimensionNumbers::ragged_dot();
  std::optional<DType> preferred_element_type;  // output dtype; default follows JAX's rule
  std::optional<GroupOffset> group_offset;
  bool operator==(const RaggedDotSpec&) const = default;
};

// A validated ragged dot. Cheap to copy.
class RaggedDot {
 public:
  // Validates `spec` with JAX's shape and dtype rules; errors name the offending dimension.
  static Result<RaggedDot> create(RaggedDotSpec spec);

  // jax.lax.ragged_dot(lhs[m,k], rhs[g,k,n], group_sizes[g]) with the given dtypes.
  static Result<RaggedDot> ragged_dot(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t g,
                                      DType dtype, std::optional<DType> out_dtype = std::nullopt,
                                      DType group_sizes_dtype = DType::kI32);

  const RaggedDotSpec& spec() const { return spec_; }
  RaggedMode mode() const { return mode_; }
  std::int64_t lhs_ragged_dim() const { return spec_.dims.lhs_ragged[0]; }
  const TensorSpec& out() const { return out_; }
  std::int64_t num_groups() const { return num_groups_; }  // last dim of group_sizes
  // Groups that are computed: num_groups(), or GroupOffset::local_groups.
  std::int64_t computed_groups() const;
  bool has_group_offset() const { return spec_.group_offset.has_value(); }
  // 2 * (useful multiply-adds) needs the group sizes; this is the dense upper bound.
  double max_flops() const;
  std::string to_string() const;

 private:
  RaggedDot() = default;
  RaggedDotSpec spec_;
  RaggedMode mode_ = RaggedMode::kNonContracting;
  TensorSpec out_;
  std::int64_t num_groups_ = 0;
};

// JAX's result-type rule for dot_general (f32 > bf16 > f16), then preferred_element_type.
Result<DType> infer_output_dtype(DType lhs, DType rhs, std::optional<DType> preferred);

}  // namespace ragdot
