// A plain-text table with columns padded to their widest cell; numeric columns align right.
#pragma once

#include <string>
#include <vector>

namespace ragdot::cli {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  void add_column(std::string header, Align align = Align::kLeft);
  void add_row(std::vector<std::string> cells);
  std::string render(const std::string& indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// printf into a std::string
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace ragdot::cli
