// The oracle: ragged_dot_general evaluated straight from JAX's definition (masked dense dot),
// with float64 accumulation and no use of the canonical GroupGemmProblem, so that every backend,
// canonicalization included, is checked against something independent of it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/group_sizes.hpp"
#include "ragdot/op.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cpu {

class ReferenceEvaluator {
 public:
  // Host buffers; group sizes are validated (negative or oversized sums are errors).
  static Result<ReferenceEvaluator> create(const RaggedDot& op, const void* lhs, const void* rhs,
                                           const void* group_sizes, const void* group_offset = nullptr);

  // One output element (flat row-major index into op.out()).
  double at(std::int64_t flat_index) const;
  // Every output element, on RAGDOT_NUM_THREADS threads (the same values as at()).
  std::vector<double> evaluate() const;

 private:
  const RaggedDot* op_ = nullptr;
  const void* lhs_ = nullptr;
  const void* rhs_ = nullptr;
  core::GroupBounds bounds_;
  std::int64_t group_offset_ = 0;

  // Precomputed dimension maps.
  std::vector<std::int64_t> lhs_strides_, rhs_strides_, out_shape_;
  // For each out dim: the lhs dim and rhs dim it indexes (-1 if none); out dim 0 is the group in mode 2.
  std::vector<std::int64_t> out_to_lhs_, out_to_rhs_;
  std::vector<std::int64_t> k_sizes_, k_lhs_dim_, k_rhs_dim_;
  std::vector<std::int64_t> prefix_dims_;  // lhs dims indexing group_sizes rows (empty if gs is 1-D)
  std::vector<std::int64_t> prefix_sizes_;
};

// Reads one element of a floating buffer as double.
double load_as_double(const void* base, DType dtype, std::int64_t index);
// Writes a double to one element, rounding through f32 for 16-bit types.
void store_from_double(void* base, DType dtype, std::int64_t index, double v);

// The SwiGLU epilogue (PlanOptions::swiglu_epilogue) of one gate and up value of a product, each
// first rounded to `dtype` as a stored product would be: silu(gate) * up in f32.
float swiglu_of_stored(double gate, double up, DType dtype);

}  // namespace ragdot::cpu
