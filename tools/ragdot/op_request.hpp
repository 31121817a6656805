// A ragged dot described by a few sizes, in the plain forms of the three modes, as `ragdot plan`
// takes it from flags:
//   mode 1 (forward):        lhs [m,k]   x rhs [g,k,n]  -> out [m,n]     groups split m
//   mode 2 (weight grad):    lhs [k,m]   x rhs [k,n]    -> out [g,m,n]   groups split k
//   mode 3 (ragged batch):   lhs [b,m,k] x rhs [b,k,n]  -> out [b,m,n]   groups split b
// With local_groups, only that many groups starting at an execute-time offset are computed.
#pragma once

#include <cstdint>
#include <optional>

#include "ragdot/op.hpp"

namespace ragdot::cli {

struct OpRequest {
  int mode = 1;
  std::int64_t m = 0, k = 0, n = 0;
  std::int64_t groups = 1;
  std::int64_t batch = 1;  // mode 3 only
  DType dtype = DType::kBF16;
  std::optional<DType> out_dtype;
  DType group_sizes_dtype = DType::kI32;
  std::optional<std::int64_t> local_groups;
};

// Validated by RaggedDot::create: the error names the offending dimension.
Result<RaggedDot> make_op(const OpRequest& request);

}  // namespace ragdot::cli
