#include "bar_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ragdot::cli {

namespace {

const Color kBackground{255, 255, 255};
const Color kInk{20, 20, 20};
const Color kMuted{110, 110, 110};
const Color kGrid{225, 225, 225};
const Color kPalette[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                          {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};

constexpr int kLabelScale = 2;  // 10x14-pixel letters for everything but the values on the bars
constexpr int kPlotHeight = 420;

struct Ticks {
  double step = 1, top = 1;
  int decimals = 0;
};

// Round steps (1, 2 or 5 times a power of ten), about five of them up to the largest value.
Ticks nice_ticks(double largest) {
  Ticks t;
  if (!(largest > 0)) largest = 1;
  const double raw = largest / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  t.step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * magnitude;
  t.top = std::ceil(largest / t.step - 1e-9) * t.step;
  t.decimals = std::max(0, int(-std::floor(std::log10(t.step) + 1e-9)));
  return t;
}

std::string value_text(double v) {
  char buf[32];
  if (v >= 100) std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (v >= 10) std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (v >= 0.01) std::snprintf(buf, sizeof buf, "%.2f", v);
  else std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

}  // namespace

RasterCanvas render_bar_chart(const BarChart& chart) {
  const int series = std::max<int>(1, int(chart.series.size()));
  double largest = 0;
  int label_lines = 1;
  int widest_label = 0, widest_value = 0;
  for (const auto& g : chart.groups) {
    for (double v : g.values) {
      if (std::isfinite(v)) {
        largest = std::max(largest, v);
        widest_value = std::max(widest_value, RasterCanvas::text_width(value_text(v)));
      }
    }
    label_lines = std::max<int>(label_lines, int(g.label_lines.size()));
    for (const auto& l : g.label_lines) widest_label = std::max(widest_label, RasterCanvas::text_width(l, kLabelScale));
  }
  const Ticks ticks = nice_ticks(largest);

  const int bar_width = std::max(26, widest_value + 6);
  const int group_width = std::max(series * bar_width + 28, widest_label + 20);
  int widest_tick = 0;
  for (double v = 0; v <= ticks.top + ticks.step / 2; v += ticks.step) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", ticks.decimals, v);
    widest_tick = std::max(widest_tick, RasterCanvas::text_width(buf, kLabelScale));
  }
  const int line_height = RasterCanvas::text_height(kLabelScale) + 6;
  const int left = 24 + line_height + widest_tick + 12;
  const int top = 24 + line_height * (chart.subtitle.empty() ? 2 : 3) + 16;
  const int bottom = 16 + line_height * label_lines + 16;
  const int plot_width = std::max(1, int(chart.groups.size())) * group_width;
  int width = left + plot_width + 24;
  // the title and legend must fit too
  int legend_width = 0;
  for (const auto& s : chart.series) legend_width += 22 + RasterCanvas::text_width(s, kLabelScale) + 24;
  width = std::max({width, 640, left + legend_width + 24, 48 + RasterCanvas::text_width(chart.title, kLabelScale),
                    48 + RasterCanvas::text_width(chart.subtitle, kLabelScale)});
  const int height = top + kPlotHeight + bottom;
  RasterCanvas c(width, height, kBackground);

  // title, subtitle and legend
  int y = 20;
  c.text(24, y, chart.title, kInk, kLabelScale);
  y += line_height;
  if (!chart.subtitle.empty()) {
    c.text(24, y, chart.subtitle, kMuted, kLabelScale);
    y += line_height;
  }
  int x = left;
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const Color col = kPalette[s % std::size(kPalette)];
    c.fill_rect(x, y + 1, 14, 14, col);
    x += 22;
    c.text(x, y + 1, chart.series[s], kInk, kLabelScale);
    x += RasterCanvas::text_width(chart.series[s], kLabelScale) + 24;
  }

  // value axis: grid lines and tick labels
  const int plot_top = top, plot_bottom = top + kPlotHeight;
  auto y_of = [&](double v) { return plot_bottom - int(std::lround(v / ticks.top * kPlotHeight)); };
  for (double v = 0; v <= ticks.top + ticks.step / 2; v += ticks.step) {
    const int ty = y_of(v);
    c.hline(left, left + plot_width, ty, kGrid);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", ticks.decimals, v);
    const std::string label = buf;
    c.text(left - 10 - RasterCanvas::text_width(label, kLabelScale), ty - RasterCanvas::text_height(kLabelScale) / 2,
           label, kInk, kLabelScale);
  }
  const int axis_label_x = 20;
  const int axis_label_y = plot_top + kPlotHeight / 2 + RasterCanvas::text_width(chart.value_axis, kLabelScale) / 2;
  c.text_vertical(axis_label_x, axis_label_y, chart.value_axis, kInk, kLabelScale);
  c.vline(left, plot_top, plot_bottom, kInk);
  c.hline(left, left + plot_width, plot_bottom, kInk);

  // bars, their values, and the group labels
  for (std::size_t gi = 0; gi < chart.groups.size(); ++gi) {
    const BarGroup& g = chart.groups[gi];
    const int gx = left + int(gi) * group_width;
    const int bars_x = gx + (group_width - series * bar_width) / 2;
    for (std::size_t s = 0; s < g.values.size() && int(s) < series; ++s) {
      const double v = g.values[s];
      if (!std::isfinite(v)) continue;
      const int bx = bars_x + int(s) * bar_width;
      const int by = y_of(std::max(v, 0.0));
      c.fill_rect(bx + 2, by, bar_width - 4, plot_bottom - by, kPalette[s % std::size(kPalette)]);
      const std::string label = value_text(v);
      c.text(bx + (bar_width - RasterCanvas::text_width(label)) / 2, by - RasterCanvas::text_height() - 3, label, kInk);
    }
    if (gi > 0) c.vline(gx, plot_bottom, plot_bottom + 6, kInk);
    int ly = plot_bottom + 12;
    for (const auto& l : g.label_lines) {
      c.text(gx + (group_width - RasterCanvas::text_width(l, kLabelScale)) / 2, ly, l, kInk, kLabelScale);
      ly += line_height;
    }
  }
  return c;
}

}  // namespace ragdot::cli
