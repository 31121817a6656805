// Turns option values into numbers, lists, shapes and dtypes; every failure is a UsageError that
// names the option and says what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ragdot/dtype.hpp"

namespace ragdot::cli {

std::int64_t parse_integer(std::string_view text, std::string_view option, std::int64_t min, std::int64_t max);
std::uint64_t parse_seed(std::string_view text, std::string_view option);
double parse_real(std::string_view text, std::string_view option, double min, double max);

// Comma-separated; empty items are errors.
std::vector<std::string> split_list(std::string_view text, std::string_view option);
std::vector<std::int64_t> parse_integer_list(std::string_view text, std::string_view option, std::int64_t min,
                                             std::int64_t max);
std::vector<double> parse_real_list(std::string_view text, std::string_view option, double min, double max);

struct GemmShape {
  std::int64_t m = 0, k = 0, n = 0;
};
// "M,K,N"
GemmShape parse_shape(std::string_view text, std::string_view option);

// An operand type the backends compute in: f32, bf16 or f16 (and their long names).
DType parse_operand_dtype(std::string_view text, std::string_view option);

// 1, 2 or 3 (ragged non-contracting, contracting, batch).
int parse_mode(std::string_view text, std::string_view option);

}  // namespace ragdot::cli
