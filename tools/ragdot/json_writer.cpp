#include "json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace ragdot::cli {

std::string json_escape(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

void JsonWriter::newline() {
  out_ += '\n';
  out_ += std::string(has_element_.size() * 2, ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
    newline();
  }
}

void JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  has_element_.push_back(false);
}

void JsonWriter::end_object() {
  const bool any = has_element_.back();
  has_element_.pop_back();
  if (any) newline();
  out_ += '}';
}

void JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  has_element_.push_back(false);
}

void JsonWriter::end_array() {
  const bool any = has_element_.back();
  has_element_.pop_back();
  if (any) newline();
  out_ += ']';
}

void JsonWriter::key(std::string_view name) {
  before_value();
  out_ += json_escape(name) + ": ";
  after_key_ = true;
}

void JsonWriter::value(std::string_view s) {
  before_value();
  out_ += json_escape(s);
}

void JsonWriter::value(double number) {
  before_value();
  if (!std::isfinite(number)) {
    out_ += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", number);
  out_ += buf;
}

void JsonWriter::value(long long number) {
  before_value();
  out_ += std::to_string(number);
}

void JsonWriter::value(unsigned long long number) {
  before_value();
  out_ += std::to_string(number);
}

void JsonWriter::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
}

void JsonWriter::null() {
  before_value();
  out_ += "null";
}

}  // namespace ragdot::cli
