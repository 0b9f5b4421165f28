#include "figures/heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "figures/plot.hpp"

// The one definition of stb_image_write in qkv; its code is not ours to make -Wextra clean.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wpedantic"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>
#pragma GCC diagnostic pop

namespace qkv::figures {
namespace {

constexpr int kPad = 12, kAdv = 12, kTextH = 14, kMaxLabel = 12;
constexpr int kBarGap = 16, kBarW = 16, kMinWidth = 240, kMinBarH = 100;

// A 5x7 font for ASCII 32..126: 7 rows per glyph, bit 4 is the leftmost pixel.
const uint8_t kFont[95][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // space
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04},  // !
    {0x0A, 0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00},  // "
    {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A},  // #
    {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04},  // $
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03},  // %
    {0x0C, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0D},  // &
    {0x04, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00},  // '
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02},  // (
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08},  // )
    {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00},  // *
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00},  // +
    {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08},  // ,
    {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00},  // -
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C},  // .
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00},  // /
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E},  // 0
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},  // 1
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F},  // 2
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},  // 3
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02},  // 4
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},  // 5
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E},  // 6
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},  // 7
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E},  // 8
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},  // 9
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00},  // :
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x04, 0x08},  // ;
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02},  // <
    {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00},  // =
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08},  // >
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04},  // ?
    {0x0E, 0x11, 0x01, 0x0D, 0x15, 0x15, 0x0E},  // @
    {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},  // A
    {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E},  // B
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E},  // C
    {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C},  // D
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F},  // E
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10},  // F
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F},  // G
    {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},  // H
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},  // I
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C},  // J
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11},  // K
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F},  // L
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11},  // M
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},  // N
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // O
    {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10},  // P
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D},  // Q
    {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11},  // R
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E},  // S
    {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // T
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // U
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04},  // V
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A},  // W
    {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11},  // X
    {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04},  // Y
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F},  // Z
    {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E},  // [
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00},  // backslash
    {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E},  // ]
    {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00},  // ^
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F},  // _
    {0x08, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00},  // `
    {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F},  // a
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E},  // b
    {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E},  // c
    {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F},  // d
    {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E},  // e
    {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08},  // f
    {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E},  // g
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11},  // h
    {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E},  // i
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C},  // j
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12},  // k
    {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},  // l
    {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11},  // m
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11},  // n
    {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E},  // o
    {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10},  // p
    {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01},  // q
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10},  // r
    {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E},  // s
    {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06},  // t
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D},  // u
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04},  // v
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A},  // w
    {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11},  // x
    {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E},  // y
    {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F},  // z
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02},  // {
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // |
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08},  // }
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00},  // ~
};

struct Image {
  int w, h;
  std::vector<uint8_t> px;
  void set(int x, int y, const uint8_t c[3]) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    uint8_t* p = &px[(static_cast<size_t>(y) * w + x) * 3];
    p[0] = c[0], p[1] = c[1], p[2] = c[2];
  }
  void fill(int x0, int y0, int x1, int y1, const uint8_t c[3]) {  // [x0, x1) x [y0, y1)
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) set(x, y, c);
  }
  void frame(int x0, int y0, int x1, int y1, const uint8_t c[3]) {  // 1 px outline
    fill(x0, y0, x1, y0 + 1, c), fill(x0, y1 - 1, x1, y1, c);
    fill(x0, y0, x0 + 1, y1, c), fill(x1 - 1, y0, x1, y1, c);
  }
  // ASCII text with its top-left corner at (x, y), each font pixel s x s. vertical: rotated a
  // quarter turn counter-clockwise, (x, y) is then the bottom-left corner and text runs upward.
  void text(int x, int y, const std::string& s, int scale, const uint8_t c[3],
            bool vertical = false) {
    const int adv = 6 * scale;
    for (size_t k = 0; k < s.size(); ++k) {
      const int code = static_cast<unsigned char>(s[k]);
      const uint8_t* g = kFont[(code >= 32 && code < 127 ? code : '?') - 32];
      for (int gy = 0; gy < 7; ++gy)
        for (int gx = 0; gx < 5; ++gx) {
          if (!(g[gy] >> (4 - gx) & 1)) continue;
          const int kk = static_cast<int>(k);
          const int px0 = vertical ? x + gy * scale : x + kk * adv + gx * scale;
          const int py0 = vertical ? y - kk * adv - (gx + 1) * scale : y + gy * scale;
          fill(px0, py0, px0 + scale, py0 + scale, c);
        }
    }
  }
};

int label_len(const std::string& s) { return std::max<int>(1, static_cast<int>(s.size())); }

int longest(const std::vector<std::string>& labels) {
  int n = 1;
  for (const auto& l : labels) n = std::max(n, label_len(heatmap_label(l)));
  return n;
}

// Column labels that fit across a cell are drawn upright, else vertical.
bool upright_columns(const Heatmap& h) { return kAdv * longest(h.col_labels) <= h.cell; }
int col_band(const Heatmap& h) {
  return upright_columns(h) ? kTextH : kAdv * longest(h.col_labels);
}

std::string tick(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", v);
  return buf;
}

std::string cell_text(double v) {  // "1", ".73", "0": fits three characters
  if (!std::isfinite(v)) return "?";
  if (v >= 0.995 && v < 1.005) return "1";
  if (v >= 0 && v < 0.995) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return std::string(buf + 1) == ".00" ? "0" : std::string(buf + 1);
  }
  return tick(v).substr(0, 4);
}

// The title as drawn: 2x when it fits, else 1x, else cut.
std::pair<std::string, int> fit_title(const std::string& t, int width) {
  const int room = width - 2 * kPad;
  if (static_cast<int>(t.size()) * kAdv <= room) return {t, 2};
  const size_t max1 = static_cast<size_t>(room / 6);
  return {t.size() <= max1 ? t : t.substr(0, max1 - 1) + "~", 1};
}

}  // namespace

std::string heatmap_label(const std::string& token) {
  std::string out;
  int n = 0;
  for (size_t i = 0; i < token.size();) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    const size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (++n > kMaxLabel) {
      out.back() = '~';
      break;
    }
    out += c == ' ' ? '_' : (c >= 33 && c < 127) ? static_cast<char>(c) : '?';
    i += len;
  }
  return out;
}

HeatmapLayout heatmap_layout(const Heatmap& h) {
  QKV_CHECK(h.rows > 0 && h.cols > 0, "heatmap", "needs at least one row and column, got ", h.rows,
            " x ", h.cols);
  QKV_CHECK(static_cast<int64_t>(h.values.size()) == h.rows * h.cols, "heatmap", h.values.size(),
            " values for ", h.rows, " x ", h.cols, " cells");
  QKV_CHECK(static_cast<int64_t>(h.row_labels.size()) == h.rows &&
                static_cast<int64_t>(h.col_labels.size()) == h.cols,
            "heatmap", h.row_labels.size(), " row labels and ", h.col_labels.size(),
            " column labels for ", h.rows, " x ", h.cols, " cells");
  QKV_CHECK(h.cell >= 4, "heatmap", "cell must be >= 4 pixels, got ", h.cell);
  QKV_CHECK(h.vmax > h.vmin, "heatmap", "empty colour scale [", h.vmin, ", ", h.vmax, "]");
  HeatmapLayout l;
  l.cell = h.cell;
  l.grid_x = kPad + kTextH + 8 + kAdv * longest(h.row_labels) + 6;
  l.grid_y = kPad + kTextH + 10;
  const int gw = static_cast<int>(h.cols) * h.cell, gh = static_cast<int>(h.rows) * h.cell;
  l.width = std::max(kMinWidth, l.grid_x + gw + kBarGap + kBarW + 6 + 4 * kAdv + kPad);
  l.height = l.grid_y + std::max(gh, kMinBarH) + 6 + col_band(h) + 8 + kTextH + kPad;
  return l;
}

void heatmap_color(double v, double vmin, double vmax, uint8_t rgb[3]) {
  // white -> light blue -> blue -> dark blue, linear between the stops
  static const double stops[5][3] = {
      {250, 252, 255}, {190, 215, 238}, {100, 165, 212}, {35, 105, 175}, {10, 45, 100}};
  double t = std::isfinite(v) ? (v - vmin) / (vmax - vmin) : 0.0;
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<uint8_t>(std::lround(stops[i][c] + (stops[i + 1][c] - stops[i][c]) * f));
}

namespace {

// Calls fn(value, rgb, x0, y0) for every cell of the grid, row by row: its value, its colour
// and its top-left corner in the figure. The PNG and the SVG draw the same cells.
template <class F>
void for_each_cell(const Heatmap& h, const HeatmapLayout& l, F&& fn) {
  for (int64_t i = 0; i < h.rows; ++i)
    for (int64_t j = 0; j < h.cols; ++j) {
      const double v = h.values[i * h.cols + j];
      uint8_t c[3];
      heatmap_color(v, h.vmin, h.vmax, c);
      fn(v, c, l.grid_x + static_cast<int>(j) * l.cell, l.grid_y + static_cast<int>(i) * l.cell);
    }
}

}  // namespace

std::vector<uint8_t> render_heatmap_rgb(const Heatmap& h, HeatmapLayout* out_layout) {
  const HeatmapLayout l = heatmap_layout(h);
  if (out_layout) *out_layout = l;
  Image img{l.width, l.height,
            std::vector<uint8_t>(static_cast<size_t>(l.width) * l.height * 3, 255)};
  const uint8_t black[3] = {0, 0, 0}, white[3] = {255, 255, 255}, grey[3] = {90, 90, 90};
  const int gw = static_cast<int>(h.cols) * l.cell, gh = static_cast<int>(h.rows) * l.cell;
  const bool annotate = l.cell >= 22;
  for_each_cell(h, l, [&](double v, const uint8_t* c, int x0, int y0) {
    img.fill(x0, y0, x0 + l.cell, y0 + l.cell, c);
    if (annotate) {
      const std::string s = cell_text(v);
      const double t = (v - h.vmin) / (h.vmax - h.vmin);
      img.text(x0 + (l.cell - 6 * static_cast<int>(s.size()) + 1) / 2, y0 + (l.cell - 7) / 2, s, 1,
               t > 0.55 ? white : grey);
    }
  });
  img.frame(l.grid_x - 1, l.grid_y - 1, l.grid_x + gw + 1, l.grid_y + gh + 1, black);
  // row labels, right-aligned against the grid; column labels vertical, ending at the grid
  for (int64_t i = 0; i < h.rows; ++i) {
    const std::string s = heatmap_label(h.row_labels[i]);
    img.text(l.grid_x - 6 - kAdv * static_cast<int>(s.size()),
             l.grid_y + static_cast<int>(i) * l.cell + (l.cell - kTextH) / 2, s, 2, black);
  }
  const bool upright = upright_columns(h);
  for (int64_t j = 0; j < h.cols; ++j) {
    const std::string s = heatmap_label(h.col_labels[j]);
    const int x0 = l.grid_x + static_cast<int>(j) * l.cell;
    if (upright)
      img.text(x0 + (l.cell - kAdv * static_cast<int>(s.size()) + 2) / 2, l.grid_y + gh + 6, s, 2,
               black);
    else
      img.text(x0 + (l.cell - kTextH) / 2, l.grid_y + gh + 6 + kAdv * static_cast<int>(s.size()), s,
               2, black, true);
  }
  // axis labels and title
  const int bottom_text = l.height - kPad - kTextH;
  img.text(l.grid_x + (gw - kAdv * static_cast<int>(h.x_label.size())) / 2, bottom_text, h.x_label,
           2, black);
  img.text(kPad, l.grid_y + (gh + kAdv * static_cast<int>(h.y_label.size())) / 2, h.y_label, 2,
           black, true);
  const auto [title, ts] = fit_title(h.title, l.width);
  img.text(kPad, kPad + (ts == 2 ? 0 : 4), title, ts, black);
  // colour bar: vmax at the top
  const int bx = l.grid_x + gw + kBarGap, bh = std::max(gh, kMinBarH);
  for (int y = 0; y < bh; ++y) {
    uint8_t c[3];
    heatmap_color(h.vmax - (h.vmax - h.vmin) * y / std::max(1, bh - 1), h.vmin, h.vmax, c);
    img.fill(bx, l.grid_y + y, bx + kBarW, l.grid_y + y + 1, c);
  }
  img.frame(bx - 1, l.grid_y - 1, bx + kBarW + 1, l.grid_y + bh + 1, black);
  for (int k = 0; k <= 2; ++k) {
    const int y = l.grid_y + (bh - 1) * k / 2;
    img.text(bx + kBarW + 6, std::clamp(y - 7, 0, l.height - kTextH),
             tick(h.vmax - (h.vmax - h.vmin) * k / 2), 2, black);
  }
  return img.px;
}

std::string render_heatmap_svg(const Heatmap& h) {
  const HeatmapLayout l = heatmap_layout(h);
  const int gw = static_cast<int>(h.cols) * l.cell, gh = static_cast<int>(h.rows) * l.cell;
  std::ostringstream o;
  auto hex = [](const uint8_t c[3]) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
    return std::string(buf);
  };
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << l.width << "' height='" << l.height
    << "' font-family='monospace' font-size='16'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  const auto [title, ts] = fit_title(h.title, l.width);
  o << "<text x='" << kPad << "' y='" << kPad + kTextH - 2 << "' font-size='" << (ts == 2 ? 16 : 9)
    << "'>" << xml_escape(title) << "</text>\n";
  for_each_cell(h, l, [&](double v, const uint8_t* c, int x0, int y0) {
    o << "<rect x='" << x0 << "' y='" << y0 << "' width='" << l.cell << "' height='" << l.cell
      << "' fill='" << hex(c) << "'><title>" << v << "</title></rect>\n";
    if (l.cell >= 22)
      o << "<text x='" << x0 + l.cell / 2 << "' y='" << y0 + l.cell / 2 + 4
        << "' font-size='10' text-anchor='middle' fill='"
        << ((v - h.vmin) / (h.vmax - h.vmin) > 0.55 ? "white" : "#5a5a5a") << "'>" << cell_text(v)
        << "</text>\n";
  });
  o << "<rect x='" << l.grid_x << "' y='" << l.grid_y << "' width='" << gw << "' height='" << gh
    << "' fill='none' stroke='black'/>\n";
  for (int64_t i = 0; i < h.rows; ++i)
    o << "<text x='" << l.grid_x - 6 << "' y='"
      << l.grid_y + static_cast<int>(i) * l.cell + l.cell / 2 + 5 << "' text-anchor='end'>"
      << xml_escape(heatmap_label(h.row_labels[i])) << "</text>\n";
  const bool upright = upright_columns(h);
  for (int64_t j = 0; j < h.cols; ++j) {
    const int cx = l.grid_x + static_cast<int>(j) * l.cell + l.cell / 2, y = l.grid_y + gh + 6;
    if (upright)
      o << "<text x='" << cx << "' y='" << y + kTextH - 1 << "' text-anchor='middle'>";
    else
      o << "<text transform='translate(" << cx + 5 << "," << y
        << ") rotate(-90)' text-anchor='end'>";
    o << xml_escape(heatmap_label(h.col_labels[j])) << "</text>\n";
  }
  o << "<text x='" << l.grid_x + gw / 2 << "' y='" << l.height - kPad - 2
    << "' text-anchor='middle'>" << xml_escape(h.x_label) << "</text>\n";
  o << "<text transform='translate(" << kPad + kTextH - 2 << "," << l.grid_y + gh / 2
    << ") rotate(-90)' text-anchor='middle'>" << xml_escape(h.y_label) << "</text>\n";
  const int bx = l.grid_x + gw + kBarGap, bh = std::max(gh, kMinBarH);
  o << "<defs><linearGradient id='scale' x1='0' y1='1' x2='0' y2='0'>";
  for (int k = 0; k <= 8; ++k) {
    uint8_t c[3];
    heatmap_color(h.vmin + (h.vmax - h.vmin) * k / 8, h.vmin, h.vmax, c);
    o << "<stop offset='" << k / 8.0 << "' stop-color='" << hex(c) << "'/>";
  }
  o << "</linearGradient></defs>\n<rect x='" << bx << "' y='" << l.grid_y << "' width='" << kBarW
    << "' height='" << bh << "' fill='url(#scale)' stroke='black'/>\n";
  for (int k = 0; k <= 2; ++k) {
    const int y = l.grid_y + (bh - 1) * k / 2;
    o << "<text x='" << bx + kBarW + 6 << "' y='" << y + 5 << "'>"
      << tick(h.vmax - (h.vmax - h.vmin) * k / 2) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string encode_png(const std::vector<uint8_t>& rgb, int width, int height) {
  QKV_CHECK(width > 0 && height > 0 && rgb.size() == static_cast<size_t>(width) * height * 3,
            "encode_png", rgb.size(), " bytes for a ", width, " x ", height, " RGB image");
  std::string out;
  auto sink = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data),
                                           static_cast<size_t>(size));
  };
  const int ok = stbi_write_png_to_func(sink, &out, width, height, 3, rgb.data(), width * 3);
  QKV_CHECK(ok != 0, "encode_png", "stb_image_write failed for a ", width, " x ", height, " image");
  return out;
}

void write_heatmap(const std::string& path, const Heatmap& h) {
  auto ends = [&](const char* ext) {
    const std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".png")) {
    HeatmapLayout l;
    const std::vector<uint8_t> rgb = render_heatmap_rgb(h, &l);
    atomic_write_file(path, encode_png(rgb, l.width, l.height));
  } else if (ends(".svg")) {
    atomic_write_file(path, render_heatmap_svg(h));
  } else {
    throw Error(cat("heatmap: ", path, ": the file name must end in .png or .svg"));
  }
}

}  // namespace qkv::figures
