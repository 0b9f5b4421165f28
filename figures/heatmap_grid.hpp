// Many heatmaps tiled into one figure (PNG or SVG): `qkv attention --layer all --head all`
// draws every layer (rows) and head (columns) of each attention kind (stacked) this way.
#pragma once
#include <string>
#include <vector>

#include "figures/heatmap.hpp"

namespace qkv::figures {

// rows[i][j] is drawn in row i, column j, each at its own heatmap_layout size; a row is as tall
// as its tallest map, a column as wide as its widest, with `gap` white pixels between them.
// Rows may have different lengths. Returns RGB pixels (3 bytes each) and the figure's size.
std::vector<uint8_t> render_heatmap_grid_rgb(const std::vector<std::vector<Heatmap>>& rows,
                                             int* width, int* height, int gap = 8);
std::string render_heatmap_grid_svg(const std::vector<std::vector<Heatmap>>& rows, int gap = 8);
// A PNG when path ends in ".png", an SVG when it ends in ".svg" (else an error), atomically.
void write_heatmap_grid(const std::string& path, const std::vector<std::vector<Heatmap>>& rows);

}  // namespace qkv::figures
