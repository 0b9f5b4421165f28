// A tiny plotting module: line and bar charts as SVG (axes, ticks, labels, legend) and heatmaps as
// PNG or SVG (heatmap.hpp). Every figure qkv writes goes through here.
#pragma once
#include <string>
#include <vector>

namespace qkv::app {

struct Series {
  std::string label;
  std::vector<double> x, y;
  std::string color;  // "" picks from a palette
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<Series> series;
};

// The SVG text of a chart (width x height pixels).
std::string render_svg(const LineChart& c, int width = 720, int height = 420);
// Writes it atomically.
void write_svg(const std::string& path, const LineChart& c, int width = 720, int height = 420);

// Grouped bars: one group per category, one bar per series in each group (Series::y holds one
// value per category; x is unused). The y axis starts at 0 (bars must be >= 0).
struct BarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<Series> series;
};
std::string render_svg(const BarChart& c, int width = 720, int height = 420);
void write_svg(const std::string& path, const BarChart& c, int width = 720, int height = 420);

// s with <, >, &, ' and " replaced by entities: safe as SVG text or a quoted attribute value.
std::string xml_escape(const std::string& s);

}  // namespace qkv::app
