// Writes JSON text: objects, arrays, strings with escapes, finite numbers (non-finite -> null).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ragdot::cli {

class JsonWriter {
 public:
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view name);
  void value(std::string_view s);
  void value(const char* s) { value(std::string_view(s)); }
  void value(double number);
  void value(long long number);
  // std::int64_t is `long` on LP64 Linux; without these an int64 would be ambiguous.
  void value(long number) { value(static_cast<long long>(number)); }
  void value(int number) { value(static_cast<long long>(number)); }
  void value(unsigned long long number);  // seeds use all 64 bits
  void value(bool b);
  void null();
  // key(name) then value(v): one member of the open object.
  template <class T>
  void field(std::string_view name, const T& v) {
    key(name);
    value(v);
  }
  const std::string& text() const { return out_; }

 private:
  void before_value();
  void newline();
  std::string out_;
  // per open container: whether it has an element yet
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

std::string json_escape(std::string_view s);

}  // namespace ragdot::cli
