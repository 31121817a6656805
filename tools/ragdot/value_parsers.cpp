#include "value_parsers.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "usage_error.hpp"

namespace ragdot::cli {

namespace {

[[noreturn]] void bad_value(std::string_view option, std::string_view text, const std::string& expected) {
  throw UsageError("invalid value '" + std::string(text) + "' for --" + std::string(option) + ": expected " + expected);
}

std::string range_text(std::int64_t min, std::int64_t max) {
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::int64_t parse_integer(std::string_view text, std::string_view option, std::int64_t min, std::int64_t max) {
  const std::string t = trim(text);
  std::int64_t v = 0;
  const char* first = t.data();
  const char* last = t.data() + t.size();
  if (!t.empty() && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (t.empty() || ec != std::errc() || ptr != last || v < min || v > max) bad_value(option, text, range_text(min, max));
  return v;
}

std::uint64_t parse_seed(std::string_view text, std::string_view option) {
  const std::string t = trim(text);
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
    bad_value(option, text, "a non-negative integer below 2^64");
  }
  return v;
}

double parse_real(std::string_view text, std::string_view option, double min, double max) {
  const std::string t = trim(text);
  double v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || !std::isfinite(v) || v < min || v > max) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "a number in [%g, %g]", min, max);
    bad_value(option, text, buf);
  }
  return v;
}

std::vector<std::string> split_list(std::string_view text, std::string_view option) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) bad_value(option, text, "a comma-separated list without empty items");
    items.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<std::int64_t> parse_integer_list(std::string_view text, std::string_view option, std::int64_t min,
                                             std::int64_t max) {
  std::vector<std::int64_t> out;
  for (const auto& item : split_list(text, option)) {
    const std::string t = trim(item);
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || ptr != t.data() + t.size() || v < min || v > max) {
      bad_value(option, text, "a comma-separated list of integers in [" + std::to_string(min) + ", " +
                                  std::to_string(max) + "] ('" + item + "' is not)");
    }
    out.push_back(v);
  }
  return out;
}

std::vector<double> parse_real_list(std::string_view text, std::string_view option, double min, double max) {
  std::vector<double> out;
  for (const auto& item : split_list(text, option)) out.push_back(parse_real(item, option, min, max));
  return out;
}

GemmShape parse_shape(std::string_view text, std::string_view option) {
  std::vector<std::string> items = split_list(text, option);
  if (items.size() != 3) bad_value(option, text, "M,K,N (three sizes)");
  constexpr std::int64_t kMaxDim = std::int64_t(1) << 31;
  GemmShape s;
  s.m = parse_integer(items[0], option, 0, kMaxDim);
  s.k = parse_integer(items[1], option, 0, kMaxDim);
  s.n = parse_integer(items[2], option, 0, kMaxDim);
  return s;
}

DType parse_operand_dtype(std::string_view text, std::string_view option) {
  const auto dt = parse_dtype(trim(text));
  if (!dt || !(*dt == DType::kF32 || *dt == DType::kBF16 || *dt == DType::kF16)) {
    bad_value(option, text, "f32, bf16 or f16");
  }
  return *dt;
}

int parse_mode(std::string_view text, std::string_view option) {
  const std::string t = trim(text);
  if (t == "1" || t == "2" || t == "3") return t[0] - '0';
  bad_value(option, text, "1 (ragged non-contracting), 2 (ragged contracting) or 3 (ragged batch)");
}

}  // namespace ragdot::cli
