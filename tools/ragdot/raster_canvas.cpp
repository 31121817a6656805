#include "raster_canvas.hpp"

#include <algorithm>
#include <cstdlib>

#include "bitmap_font.hpp"

namespace ragdot::cli {

RasterCanvas::RasterCanvas(int width, int height, Color background)
    : width_(std::max(width, 1)), height_(std::max(height, 1)), rgb_(std::size_t(width_) * std::size_t(height_) * 3) {
  fill_rect(0, 0, width_, height_, background);
}

void RasterCanvas::set(int x, int y, Color c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const std::size_t i = (std::size_t(y) * std::size_t(width_) + std::size_t(x)) * 3;
  rgb_[i] = c.r;
  rgb_[i + 1] = c.g;
  rgb_[i + 2] = c.b;
}

void RasterCanvas::fill_rect(int x, int y, int w, int h, Color c) {
  const int x0 = std::max(x, 0), y0 = std::max(y, 0);
  const int x1 = std::min(x + w, width_), y1 = std::min(y + h, height_);
  for (int yy = y0; yy < y1; ++yy) {
    for (int xx = x0; xx < x1; ++xx) set(xx, yy, c);
  }
}

void RasterCanvas::hline(int x0, int x1, int y, Color c) {
  if (x0 > x1) std::swap(x0, x1);
  fill_rect(x0, y, x1 - x0 + 1, 1, c);
}

void RasterCanvas::vline(int x, int y0, int y1, Color c) {
  if (y0 > y1) std::swap(y0, y1);
  fill_rect(x, y0, 1, y1 - y0 + 1, c);
}

void RasterCanvas::line(int x0, int y0, int x1, int y1, Color c) {
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  while (true) {
    set(x0, y0, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void RasterCanvas::text(int x, int y, const std::string& s, Color c, int scale) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char* const* rows = glyph_rows(s[i]);
    const int gx = x + int(i) * kGlyphAdvance * scale;
    for (int r = 0; r < kGlyphHeight; ++r) {
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (rows[r][col] == '#') fill_rect(gx + col * scale, y + r * scale, scale, scale, c);
      }
    }
  }
}

void RasterCanvas::text_vertical(int x, int y, const std::string& s, Color c, int scale) {
  // rotated a quarter turn counter-clockwise: the text reads upwards from (x, y)
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char* const* rows = glyph_rows(s[i]);
    const int gy = y - int(i) * kGlyphAdvance * scale;
    for (int r = 0; r < kGlyphHeight; ++r) {
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (rows[r][col] == '#') fill_rect(x + r * scale, gy - (col + 1) * scale, scale, scale, c);
      }
    }
  }
}

int RasterCanvas::text_width(const std::string& s, int scale) {
  return s.empty() ? 0 : (int(s.size()) * kGlyphAdvance - 1) * scale;
}

int RasterCanvas::text_height(int scale) { return kGlyphHeight * scale; }

}  // namespace ragdot::cli
