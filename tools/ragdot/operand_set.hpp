// The inputs of one ragged dot [m,k] x [g,k,n]: random host data and, on demand, copies of it in
// the memory a backend runs on. Every backend of a comparison reads exactly the same values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "memory_buffer.hpp"
#include "ragdot/dtype.hpp"
#include "ragdot/status.hpp"
#include "verify/check.hpp"

namespace ragdot::cli {

struct OperandBuffers {
  ConstBuffer lhs, rhs, group_sizes;
};

class OperandSet {
 public:
  // lhs and rhs hold values drawn from [-1, 1) that `dtype` represents exactly; group sizes are int32.
  static Result<std::unique_ptr<OperandSet>> create(std::int64_t lhs_elements, std::int64_t rhs_elements, DType dtype,
                                                    const std::vector<std::int64_t>& group_sizes, std::uint64_t seed);

  const void* host_lhs() const { return lhs_.data(); }
  const void* host_rhs() const { return rhs_.data(); }
  DType dtype() const { return dtype_; }

  // The operands in `memory`'s space (host data as is; otherwise uploaded once and kept).
  Result<OperandBuffers> in(verify::MemoryOps& memory);

 private:
  struct Copy {
    MemoryBuffer lhs, rhs, group_sizes;
  };
  OperandSet() = default;
  DType dtype_ = DType::kF32;
  MemoryBuffer lhs_, rhs_, group_sizes_;
  std::map<MemorySpace, std::unique_ptr<Copy>> copies_;
};

// Fills `count` elements with random values from [-1, 1). Large buffers repeat a block of a prime
// number of elements, so that filling gigabytes of weights costs a copy, not a random draw per
// element, while no two rows or columns of a GEMM operand see the same values in the same place.
void fill_operand(void* data, DType dtype, std::int64_t count, std::uint64_t seed);

}  // namespace ragdot::cli
