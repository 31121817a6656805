// Static tensor descriptions (plan time) and raw buffers (execute time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ragdot/dtype.hpp"

namespace ragdot {

// A dense, row-major tensor's static description: what XLA knows at compile time.
struct TensorSpec {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;

  std::int64_t rank() const { return static_cast<std::int64_t>(shape.size()); }
  std::int64_t num_elements() const;
  std::size_t num_bytes() const { return static_cast<std::size_t>(num_elements()) * dtype_size(dtype); }
  std::string to_string() const;  // "bf16[8192,4096]"
  bool operator==(const TensorSpec&) const = default;
};

// Where a buffer lives. CPU backends take host memory; GPU backends take device memory.
enum class MemorySpace : std::uint8_t { kHost, kDevice };

const char* memory_space_name(MemorySpace space);

// Execute-time buffers carry only what is needed to check them against the plan:
// a pointer, its size in bytes and where it lives. Shapes come from the plan.
struct ConstBuffer {
  const void* data = nullptr;
  std::size_t bytes = 0;
  MemorySpace space = MemorySpace::kHost;
};

struct MutableBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  MemorySpace space = MemorySpace::kHost;

  operator ConstBuffer() const { return {data, bytes, space}; }  // NOLINT
};

}  // namespace ragdot
