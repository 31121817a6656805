// Small helpers over dimension lists shared by validation, canonicalization and the oracle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragdot/op.hpp"

namespace ragdot::core {

std::string dims_to_string(const std::vector<std::int64_t>& v);

// Dims in [0, rank) that are in none of the lists, in axis order.
std::vector<std::int64_t> free_dims(std::int64_t rank, const std::vector<std::int64_t>& a,
                                    const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& c);

// The lhs dims that index group_sizes ahead of its last dim (JAX's prefix dims):
// mode 1: batch + non-contracting dims before the ragged one (axis order);
// mode 2: batch + contracting dims before the ragged one (list order);
// mode 3: batch dims before the ragged one (list order).
std::vector<std::int64_t> ragged_prefix_dims(RaggedMode mode, std::int64_t rank, std::int64_t ragged,
                                             const std::vector<std::int64_t>& batch,
                                             const std::vector<std::int64_t>& contracting);

// Row-major strides of a shape, in elements.
std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape);

}  // namespace ragdot::core
