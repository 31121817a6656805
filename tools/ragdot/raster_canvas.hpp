// An RGB pixel canvas with the few drawing operations a chart needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragdot::cli {

struct Color {
  std::uint8_t r = 0, g = 0, b = 0;
};

class RasterCanvas {
 public:
  RasterCanvas(int width, int height, Color background);
  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<std::uint8_t>& pixels() const { return rgb_; }

  void set(int x, int y, Color c);  // outside the canvas: ignored
  void fill_rect(int x, int y, int w, int h, Color c);
  void hline(int x0, int x1, int y, Color c);
  void vline(int x, int y0, int y1, Color c);
  void line(int x0, int y0, int x1, int y1, Color c);  // Bresenham
  // Text with the built-in 5x7 font, each font pixel drawn as scale x scale pixels.
  void text(int x, int y, const std::string& s, Color c, int scale = 1);
  void text_vertical(int x, int y, const std::string& s, Color c, int scale = 1);  // bottom to top
  static int text_width(const std::string& s, int scale = 1);
  static int text_height(int scale = 1);

 private:
  int width_, height_;
  std::vector<std::uint8_t> rgb_;
};

}  // namespace ragdot::cli
