// Element types ragdot understands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ragdot {

enum class DType : std::uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,  // only as an oracle accumulation type and for host-side checks
  kI32,
  kI64,
};

std::size_t dtype_size(DType dt);
std::string_view dtype_name(DType dt);  // "f32", "bf16", ...
std::optional<DType> parse_dtype(std::string_view name);  // accepts "f32"/"float32", "bf16"/"bfloat16", ...
bool is_floating(DType dt);
bool is_integer(DType dt);

}  // namespace ragdot
