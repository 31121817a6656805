// A buffer owned through a verify::MemoryOps (host or GPU memory), freed when it goes out of scope.
#pragma once

#include <cstddef>

#include "ragdot/status.hpp"
#include "ragdot/tensor.hpp"
#include "verify/check.hpp"

namespace ragdot::cli {

class MemoryBuffer {
 public:
  MemoryBuffer() = default;
  static Result<MemoryBuffer> allocate(verify::MemoryOps& memory, std::size_t bytes);
  MemoryBuffer(MemoryBuffer&& other) noexcept;
  MemoryBuffer& operator=(MemoryBuffer&& other) noexcept;
  MemoryBuffer(const MemoryBuffer&) = delete;
  MemoryBuffer& operator=(const MemoryBuffer&) = delete;
  ~MemoryBuffer();

  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  MemorySpace space() const { return memory_ ? memory_->space() : MemorySpace::kHost; }
  ConstBuffer as_const() const { return {ptr_, bytes_, space()}; }
  MutableBuffer as_mutable() const { return {ptr_, bytes_, space()}; }

 private:
  void release();
  verify::MemoryOps* memory_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ragdot::cli
