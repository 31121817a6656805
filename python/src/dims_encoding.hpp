// The dimension numbers travel to the XLA handlers as one flat int64 attribute,
//   [n, lhs_contracting..., n, rhs_contracting..., n, lhs_batch..., n, rhs_batch...,
//    n, lhs_ragged..., n, rhs_group...]
// (each list prefixed by its length), because an empty list is a common value (no batch dims)
// and one attribute keeps the custom call's signature fixed. ragdot/_dims.py writes it.
#pragma once

#include <cstdint>
#include <span>

#include "ragdot/op.hpp"

namespace ragdot::python {

Result<RaggedDotDimensionNumbers> decode_dims(std::span<const std::int64_t> flat);

}  // namespace ragdot::python
