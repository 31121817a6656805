#include "operand_set.hpp"

#include <algorithm>
#include <cstring>

namespace ragdot::cli {

void fill_operand(void* data, DType dtype, std::int64_t count, std::uint64_t seed) {
  constexpr std::int64_t kBlockElements = 1000003;  // prime
  const std::int64_t block = std::min(count, kBlockElements);
  verify::fill_random(data, dtype, block, seed);
  const std::size_t element = dtype_size(dtype);
  auto* bytes = static_cast<unsigned char*>(data);
  std::int64_t filled = block;
  while (filled < count) {
    // doubling copies of a whole number of blocks keep the period at one block
    const std::int64_t chunk = std::min(filled, count - filled);
    std::memcpy(bytes + std::size_t(filled) * element, bytes, std::size_t(chunk) * element);
    filled += chunk;
  }
}

Result<std::unique_ptr<OperandSet>> OperandSet::create(std::int64_t lhs_elements, std::int64_t rhs_elements,
                                                       DType dtype, const std::vector<std::int64_t>& group_sizes,
                                                       std::uint64_t seed) {
  std::unique_ptr<OperandSet> set(new OperandSet());
  set->dtype_ = dtype;
  verify::MemoryOps& host = verify::host_memory();
  const std::size_t element = dtype_size(dtype);
  RAGDOT_ASSIGN_OR_RETURN(set->lhs_, MemoryBuffer::allocate(host, std::size_t(lhs_elements) * element));
  RAGDOT_ASSIGN_OR_RETURN(set->rhs_, MemoryBuffer::allocate(host, std::size_t(rhs_elements) * element));
  RAGDOT_ASSIGN_OR_RETURN(set->group_sizes_, MemoryBuffer::allocate(host, group_sizes.size() * 4));
  fill_operand(set->lhs_.data(), dtype, lhs_elements, seed * 2 + 1);
  fill_operand(set->rhs_.data(), dtype, rhs_elements, seed * 2 + 2);
  auto* gs = static_cast<std::int32_t*>(set->group_sizes_.data());
  for (std::size_t i = 0; i < group_sizes.size(); ++i) gs[i] = std::int32_t(group_sizes[i]);
  return set;
}

Result<OperandBuffers> OperandSet::in(verify::MemoryOps& memory) {
  if (memory.space() == MemorySpace::kHost) {
    return OperandBuffers{lhs_.as_const(), rhs_.as_const(), group_sizes_.as_const()};
  }
  auto& slot = copies_[memory.space()];
  if (!slot) {
    auto copy = std::make_unique<Copy>();
    RAGDOT_ASSIGN_OR_RETURN(copy->lhs, MemoryBuffer::allocate(memory, lhs_.bytes()));
    RAGDOT_ASSIGN_OR_RETURN(copy->rhs, MemoryBuffer::allocate(memory, rhs_.bytes()));
    RAGDOT_ASSIGN_OR_RETURN(copy->group_sizes, MemoryBuffer::allocate(memory, group_sizes_.bytes()));
    RAGDOT_RETURN_IF_ERROR(memory.upload(copy->lhs.data(), lhs_.data(), lhs_.bytes()));
    RAGDOT_RETURN_IF_ERROR(memory.upload(copy->rhs.data(), rhs_.data(), rhs_.bytes()));
    RAGDOT_RETURN_IF_ERROR(memory.upload(copy->group_sizes.data(), group_sizes_.data(), group_sizes_.bytes()));
    RAGDOT_RETURN_IF_ERROR(memory.synchronize());
    slot = std::move(copy);
  }
  return OperandBuffers{slot->lhs.as_const(), slot->rhs.as_const(), slot->group_sizes.as_const()};
}

}  // namespace ragdot::cli
