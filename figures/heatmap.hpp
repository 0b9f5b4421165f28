// Heatmaps (attention matrices) as PNG or SVG, with token labels on both axes, a colour scale
// and, when the cells are large enough, each cell's value printed in it. Part of the tiny
// plotting module (plot.hpp draws the line and bar charts); the PNG path draws its own text
// with a 5x7 bitmap font, so there is no font dependency.
//
// Layout (pixels), the same for PNG and SVG, so a figure's size is known from its labels:
//   pad = 12, adv = 12 (one character of label text: the 5x7 font at 2x plus 2 px spacing)
//   left   = pad + 14 (y label, vertical) + 8 + adv * longest row label + 6
//   top    = pad + 14 (title) + 10
//   grid   = cols * cell wide, rows * cell high (cell = 32 by default)
//   bottom = 6 + band + 8 + 14 (x label) + pad, where band = 14 when every column label fits
//            across a cell (adv * longest <= cell: drawn upright), else adv * longest column
//            label (drawn vertically, ending at the grid)
//   right  = 16 + 16 (colour bar) + 6 + 4 * adv (its tick labels) + pad
//   width  = max(240, left + grid width + right)
//   height = top + max(grid height, 100) + bottom
// Labels count code points and are cut to 12 (a cut label ends in '~'); an empty label counts
// as one character. A space token is shown as '_', other non-ASCII characters as '?'.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::figures {

struct Heatmap {
  std::string title, x_label, y_label;
  std::vector<std::string> row_labels, col_labels;  // rows and cols entries
  int64_t rows = 0, cols = 0;
  std::vector<double> values;  // rows * cols, row-major: values[i * cols + j]
  double vmin = 0, vmax = 1;   // the ends of the colour scale (values are clamped)
  int cell = 32;               // pixels per cell side (>= 4)
};

struct HeatmapLayout {
  int width = 0, height = 0;
  int grid_x = 0, grid_y = 0;  // top-left corner of cell (0, 0)
  int cell = 0;
};

// The layout above; throws qkv::Error when the heatmap is malformed (label or value counts).
HeatmapLayout heatmap_layout(const Heatmap& h);

// The colour of value v on the scale [vmin, vmax] (white-blue-dark blue), as r, g, b.
void heatmap_color(double v, double vmin, double vmax, uint8_t rgb[3]);

// RGB pixels, row-major, 3 bytes per pixel, layout.width * layout.height.
std::vector<uint8_t> render_heatmap_rgb(const Heatmap& h, HeatmapLayout* layout = nullptr);
std::string render_heatmap_svg(const Heatmap& h);
// Writes a PNG when path ends in ".png", an SVG when it ends in ".svg" (else an error),
// atomically.
void write_heatmap(const std::string& path, const Heatmap& h);

// PNG bytes of an RGB image (stb_image_write; used by write_heatmap).
std::string encode_png(const std::vector<uint8_t>& rgb, int width, int height);

// The label as drawn: at most 12 characters, ASCII only (see above).
std::string heatmap_label(const std::string& token);

}  // namespace qkv::figures
