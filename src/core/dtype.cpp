#include "ragdot/dtype.hpp"

#include <string>

#include "ragdot/tensor.hpp"

namespace ragdot {

std::size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF64: return 8;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "f32" || s == "float32") return DType::kF32;
  if (s == "f16" || s == "float16" || s == "half") return DType::kF16;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "f64" || s == "float64") return DType::kF64;
  if (s == "i32" || s == "int32") return DType::kI32;
  if (s == "i64" || s == "int64") return DType::kI64;
  return std::nullopt;
}

bool is_floating(DType dt) {
  return dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16 || dt == DType::kF64;
}
bool is_integer(DType dt) { return dt == DType::kI32 || dt == DType::kI64; }

std::int64_t TensorSpec::num_elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string TensorSpec::to_string() const {
  std::string s(dtype_name(dtype));
  s += '[';
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

const char* memory_space_name(MemorySpace space) {
  return space == MemorySpace::kHost ? "host" : "device";
}

}  // namespace ragdot
