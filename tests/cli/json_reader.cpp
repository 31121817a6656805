#include "json_reader.hpp"

#include <cctype>
#include <cstdlib>

namespace ragdot::testing {

namespace {

class Reader {
 public:
  explicit Reader(std::string_view t) : t_(t) {}

  bool document(JsonValue& v) {
    skip_space();
    if (!value(v, 0)) return false;
    skip_space();
    return pos_ == t_.size() || fail("text after the value");
  }
  std::string error() const { return error_ + " at offset " + std::to_string(pos_); }

 private:
  bool fail(const char* why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  void skip_space() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (t_.substr(pos_, word.size()) != word) return fail("bad literal");
    pos_ += word.size();
    return true;
  }
  bool value(JsonValue& v, int depth) {
    if (depth > 64) return fail("nested too deeply");
    if (pos_ >= t_.size()) return fail("unexpected end");
    const char c = t_[pos_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      return string(v.string);
    }
    if (c == 't' || c == 'f') {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      v.kind = JsonValue::Kind::kNull;
      return literal("null");
    }
    return number(v);
  }
  bool number(JsonValue& v) {
    const std::size_t start = pos_;
    if (pos_ < t_.size() && t_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
      return pos_ - from;
    };
    if (pos_ < t_.size() && t_[pos_] == '0') {
      ++pos_;  // no leading zeros
    } else if (digits() == 0) {
      return fail("expected a value");
    }
    if (pos_ < t_.size() && t_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return fail("digits after the point");
    }
    if (pos_ < t_.size() && (t_[pos_] == 'e' || t_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) ++pos_;
      if (digits() == 0) return fail("digits in the exponent");
    }
    v.kind = JsonValue::Kind::kNumber;
    v.number = std::strtod(std::string(t_.substr(start, pos_ - start)).c_str(), nullptr);
    return true;
  }
  bool string(std::string& out) {
    ++pos_;  // opening quote
    while (pos_ < t_.size()) {
      const char c = t_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= t_.size()) break;
      const char e = t_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > t_.size()) return fail("short \\u escape");
          const std::string hex(t_.substr(pos_, 4));
          char* end = nullptr;
          const long code = std::strtol(hex.c_str(), &end, 16);
          if (end != hex.c_str() + 4) return fail("bad \\u escape");
          pos_ += 4;
          if (code < 0x80) out += char(code);
          else out += '?';  // the tests only need ASCII back
          break;
        }
        default: return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }
  bool array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kArray;
    ++pos_;
    skip_space();
    if (pos_ < t_.size() && t_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      skip_space();
      JsonValue item;
      if (!value(item, depth + 1)) return false;
      v.array.push_back(std::move(item));
      skip_space();
      if (pos_ >= t_.size()) return fail("unterminated array");
      if (t_[pos_] == ']') {
        ++pos_;
        return true;
      }
      if (t_[pos_++] != ',') return fail("expected , or ]");
    }
  }
  bool object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kObject;
    ++pos_;
    skip_space();
    if (pos_ < t_.size() && t_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      skip_space();
      if (pos_ >= t_.size() || t_[pos_] != '"') return fail("expected a key");
      std::string key;
      if (!string(key)) return false;
      skip_space();
      if (pos_ >= t_.size() || t_[pos_++] != ':') return fail("expected :");
      skip_space();
      JsonValue item;
      if (!value(item, depth + 1)) return false;
      if (!v.object.emplace(key, std::move(item)).second) return fail("duplicate key");
      skip_space();
      if (pos_ >= t_.size()) return fail("unterminated object");
      if (t_[pos_] == '}') {
        ++pos_;
        return true;
      }
      if (t_[pos_++] != ',') return fail("expected , or }");
    }
  }

  std::string_view t_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

std::optional<JsonValue> parse_json(std::string_view text, std::string* error) {
  Reader r(text);
  JsonValue v;
  if (!r.document(v)) {
    if (error) *error = r.error();
    return std::nullopt;
  }
  return v;
}

}  // namespace ragdot::testing
