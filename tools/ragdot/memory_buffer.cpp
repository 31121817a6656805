#include "memory_buffer.hpp"

#include <utility>

namespace ragdot::cli {

Result<MemoryBuffer> MemoryBuffer::allocate(verify::MemoryOps& memory, std::size_t bytes) {
  MemoryBuffer b;
  // Every backend takes 64-byte aligned buffers; host allocations are rounded up to that.
  RAGDOT_ASSIGN_OR_RETURN(b.ptr_, memory.alloc(bytes == 0 ? 64 : bytes));
  b.memory_ = &memory;
  b.bytes_ = bytes;
  return b;
}

MemoryBuffer::MemoryBuffer(MemoryBuffer&& other) noexcept
    : memory_(std::exchange(other.memory_, nullptr)),
      ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

MemoryBuffer& MemoryBuffer::operator=(MemoryBuffer&& other) noexcept {
  if (this != &other) {
    release();
    memory_ = std::exchange(other.memory_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MemoryBuffer::~MemoryBuffer() { release(); }

void MemoryBuffer::release() {
  if (ptr_ != nullptr) memory_->free(ptr_);
  ptr_ = nullptr;
}

}  // namespace ragdot::cli
