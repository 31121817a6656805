// A strict JSON reader for the tests (RFC 8259: no trailing commas, no NaN, no comments), so that
// the CLI's JSON output is checked by something other than the code that wrote it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ragdot::testing {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  const JsonValue* get(const std::string& key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }
};

// The value, or nullopt with `error` saying where the text stops being JSON.
std::optional<JsonValue> parse_json(std::string_view text, std::string* error = nullptr);

}  // namespace ragdot::testing
