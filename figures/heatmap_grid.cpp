// Heatmaps tiled into one figure (see heatmap_grid.hpp).
#include "figures/heatmap_grid.hpp"

#include <algorithm>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace qkv::figures {

namespace {

// Where each tile goes: x of each column, y of each row, and the figure's size.
struct GridLayout {
  std::vector<int> x, y;
  int width = 0, height = 0;
};

GridLayout grid_layout(const std::vector<std::vector<Heatmap>>& rows, int gap) {
  QKV_CHECK(!rows.empty(), "heatmap grid", "no heatmaps to draw");
  std::vector<int> col_w, row_h(rows.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) {
      const HeatmapLayout l = heatmap_layout(rows[i][j]);
      if (col_w.size() <= j) col_w.resize(j + 1, 0);
      col_w[j] = std::max(col_w[j], l.width);
      row_h[i] = std::max(row_h[i], l.height);
    }
  GridLayout g;
  int at = gap;
  for (const int w : col_w) g.x.push_back(at), at += w + gap;
  g.width = at;
  at = gap;
  for (const int h : row_h) g.y.push_back(at), at += h + gap;
  g.height = at;
  return g;
}

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

}  // namespace

std::vector<uint8_t> render_heatmap_grid_rgb(const std::vector<std::vector<Heatmap>>& rows,
                                             int* width, int* height, int gap) {
  const GridLayout g = grid_layout(rows, gap);
  std::vector<uint8_t> rgb(static_cast<size_t>(g.width) * g.height * 3, 255);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) {
      HeatmapLayout l;
      const std::vector<uint8_t> tile = render_heatmap_rgb(rows[i][j], &l);
      for (int y = 0; y < l.height; ++y)  // one tile row at a time into the figure
        std::copy_n(tile.begin() + static_cast<size_t>(y) * l.width * 3, l.width * 3,
                    rgb.begin() + (static_cast<size_t>(g.y[i] + y) * g.width + g.x[j]) * 3);
    }
  *width = g.width;
  *height = g.height;
  return rgb;
}

std::string render_heatmap_grid_svg(const std::vector<std::vector<Heatmap>>& rows, int gap) {
  const GridLayout g = grid_layout(rows, gap);
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << g.width << "' height='" << g.height
    << "'>\n<rect width='100%' height='100%' fill='white'/>\n";
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) {
      std::string tile = render_heatmap_svg(rows[i][j]);  // a nested <svg>, placed by x and y
      tile.replace(0, 5,
                   "<svg x='" + std::to_string(g.x[j]) + "' y='" + std::to_string(g.y[i]) + "' ");
      o << tile << "\n";
    }
  o << "</svg>\n";
  return o.str();
}

void write_heatmap_grid(const std::string& path, const std::vector<std::vector<Heatmap>>& rows) {
  if (ends_with(path, ".png")) {
    int w = 0, h = 0;
    const std::vector<uint8_t> rgb = render_heatmap_grid_rgb(rows, &w, &h);
    atomic_write_file(path, encode_png(rgb, w, h));
  } else if (ends_with(path, ".svg")) {
    atomic_write_file(path, render_heatmap_grid_svg(rows));
  } else {
    throw Error(cat("heatmap grid: ", path, ": the file name must end in .png or .svg"));
  }
}

}  // namespace qkv::figures
