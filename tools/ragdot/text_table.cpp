#include "text_table.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace ragdot::cli {

void TextTable::add_column(std::string header, Align align) {
  headers_.push_back(std::move(header));
  aligns_.push_back(align);
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::render(const std::string& indent) const {
  std::vector<std::size_t> width(headers_.size(), 0);
  for (std::size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (const auto& r : rows_) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      s += aligns_[c] == Align::kRight ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
      if (c + 1 < cells.size()) s += "  ";
    }
    return s + "\n";
  };
  std::string out = line(headers_);
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string s(std::size_t(std::max(n, 0)), '\0');
  std::vsnprintf(s.data(), s.size() + 1, fmt, args);
  va_end(args);
  return s;
}

}  // namespace ragdot::cli
