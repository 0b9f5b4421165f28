// A tiny plotting module: line and bar charts as SVG (axes, ticks, labels, legend) and heatmaps as
// PNG or SVG (heatmap.hpp). Every figure qkv writes goes through here.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace qkv::figures {

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

// The SVG text of a chart (width x height pixels). Tick labels are thinned so they never touch,
// the left margin fits the widest y tick label, and the legend sits in rows under the x label. A
// series with more points than two per pixel column is drawn min-max decimated (downsample below,
// one bucket per column).
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

// At most two points per bucket of equal x width: the lowest and the highest y (in their
// order), so spikes survive decimation. Non-finite points are dropped; a series of at most
// 2 * buckets points comes back unchanged.
Series downsample(const Series& s, size_t buckets);

// True when every finite y is > 0 and the largest is at least `ratio` times the smallest: a
// quantity that spans decades, better read on a log axis.
bool spans_decades(const std::vector<Series>& series, double ratio = 100);

// v as printf's %g: six significant digits, no trailing zeros ("1500", "0.25", "1e+06").
std::string general(double v);

// s with <, >, &, ' and " replaced by entities: safe as SVG text or a quoted attribute value.
std::string xml_escape(const std::string& s);

}  // namespace qkv::figures
