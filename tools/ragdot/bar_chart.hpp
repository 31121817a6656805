// A grouped bar chart: one group of bars per case, one bar (and colour) per series.
#pragma once

#include <string>
#include <vector>

#include "raster_canvas.hpp"

namespace ragdot::cli {

struct BarGroup {
  std::vector<std::string> label_lines;  // under the group, one per line
  std::vector<double> values;            // one per series; NaN where there is none
};

struct BarChart {
  std::string title;
  std::string subtitle;
  std::string value_axis;  // "TFLOP/s"
  std::vector<std::string> series;
  std::vector<BarGroup> groups;
};

RasterCanvas render_bar_chart(const BarChart& chart);

}  // namespace ragdot::cli
