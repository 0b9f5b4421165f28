// The plotting module: heatmap and bar chart (layout, pixels decoded back with stb_image,
// SVG output, label handling, errors) and line charts (decimation, ticks).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.hpp"
#include "figures/heatmap.hpp"
#include "figures/plot.hpp"
#include "support/process.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wpedantic"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb_image.h>
#pragma GCC diagnostic pop

using namespace qkv;
using namespace qkv::figures;
using namespace qkv::testing;

namespace {

// 2 x 3, labels of 1, 5 and 2 characters; the values distinct so cells can be told apart.
Heatmap sample() {
  Heatmap h;
  h.title = "test";
  h.x_label = "keys";
  h.y_label = "queries";
  h.rows = 2;
  h.cols = 3;
  h.row_labels = {"a", "<eos>"};
  h.col_labels = {"x", "yy", "z"};
  h.values = {0.0, 0.5, 1.0, 0.25, 0.75, 0.1};
  return h;
}

struct Decoded {
  int w = 0, h = 0;
  std::vector<uint8_t> px;
  const uint8_t* at(int x, int y) const { return &px[(static_cast<size_t>(y) * w + x) * 3]; }
};

Decoded decode_png(const std::string& bytes) {
  Decoded d;
  int n = 0;
  unsigned char* p = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()),
                                           static_cast<int>(bytes.size()), &d.w, &d.h, &n, 3);
  REQUIRE(p != nullptr);
  d.px.assign(p, p + static_cast<size_t>(d.w) * d.h * 3);
  stbi_image_free(p);
  return d;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("heatmap layout follows the documented formula") {
  const Heatmap h = sample();
  const HeatmapLayout l = heatmap_layout(h);
  // left = 12 + 14 + 8 + 12 * 5 ("<eos>") + 6 = 100; top = 12 + 14 + 10 = 36
  CHECK(l.grid_x == 100);
  CHECK(l.grid_y == 36);
  // width = 100 + 3 * 32 + 16 + 16 + 6 + 48 + 12 = 294
  CHECK(l.width == 294);
  // height = 36 + max(64, 100) + 6 + 14 ("yy" fits across a cell: upright) + 8 + 14 + 12 = 190
  CHECK(l.height == 190);
  Heatmap big = h;
  big.cell = 60;  // grid taller than the colour bar minimum: 2 * 60 = 120
  CHECK(heatmap_layout(big).height == 36 + 120 + 6 + 14 + 8 + 14 + 12);
  CHECK(heatmap_layout(big).width == 100 + 180 + 16 + 16 + 6 + 48 + 12);
  Heatmap tall = h;
  tall.col_labels = {"x", "abc", "z"};  // 36 px > 32: the column labels turn vertical
  CHECK(heatmap_layout(tall).height == 36 + 100 + 6 + 36 + 8 + 14 + 12);
  Heatmap narrow = h;
  narrow.cols = 1;
  narrow.col_labels = {"q"};
  narrow.values = {0.2, 0.4};
  narrow.row_labels = {"a", "b"};
  CHECK(heatmap_layout(narrow).width == 240);  // the minimum width
}

TEST_CASE("heatmap PNG: its size, each cell's colour, labels drawn") {
  const Heatmap h = sample();
  HeatmapLayout l;
  const std::vector<uint8_t> rgb = render_heatmap_rgb(h, &l);
  const Decoded d = decode_png(encode_png(rgb, l.width, l.height));
  REQUIRE(d.w == l.width);
  REQUIRE(d.h == l.height);
  for (int64_t i = 0; i < h.rows; ++i)
    for (int64_t j = 0; j < h.cols; ++j) {
      uint8_t want[3];
      heatmap_color(h.values[i * h.cols + j], 0, 1, want);
      // a corner pixel of the cell, clear of the printed value
      const uint8_t* got = d.at(l.grid_x + static_cast<int>(j) * l.cell + 2,
                                l.grid_y + static_cast<int>(i) * l.cell + 2);
      INFO("cell " << i << ", " << j);
      CHECK(int(got[0]) == int(want[0]));
      CHECK(int(got[1]) == int(want[1]));
      CHECK(int(got[2]) == int(want[2]));
    }
  // darker for larger weights: the colour scale is monotone in brightness
  uint8_t lo[3], mid[3], hi[3];
  heatmap_color(0, 0, 1, lo), heatmap_color(0.5, 0, 1, mid), heatmap_color(1, 0, 1, hi);
  CHECK(lo[0] + lo[1] + lo[2] > mid[0] + mid[1] + mid[2]);
  CHECK(mid[0] + mid[1] + mid[2] > hi[0] + hi[1] + hi[2]);
  // black label pixels left of row 1 ("<eos>") and below column 1 ("yy"); none in the blank
  // band left of the row labels' longest extent for the short label "a" of row 0
  auto dark_in = [&](int x0, int y0, int x1, int y1) {
    int n = 0;
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x)
        n += d.at(x, y)[0] < 60 && d.at(x, y)[1] < 60 && d.at(x, y)[2] < 60;
    return n;
  };
  CHECK(dark_in(l.grid_x - 6 - 60, l.grid_y + l.cell, l.grid_x - 6, l.grid_y + 2 * l.cell) > 40);
  CHECK(dark_in(l.grid_x - 6 - 60, l.grid_y, l.grid_x - 6 - 12, l.grid_y + l.cell) == 0);
  CHECK(dark_in(l.grid_x + l.cell, l.grid_y + 2 * l.cell + 6, l.grid_x + 2 * l.cell,
                l.grid_y + 2 * l.cell + 30) > 20);
  // the colour bar: its top is the darkest colour, its bottom the lightest
  const int bx = l.grid_x + 3 * l.cell + 16 + 8;
  const uint8_t* top = d.at(bx, l.grid_y + 1);
  const uint8_t* bottom = d.at(bx, l.grid_y + 98);
  CHECK(top[0] + top[1] + top[2] < 250);
  CHECK(bottom[0] + bottom[1] + bottom[2] > 700);
}

TEST_CASE("write_heatmap picks PNG or SVG by extension") {
  TempDir dir("plot");
  const Heatmap h = sample();
  write_heatmap(dir.file("m.png"), h);
  const std::string png = read_file(dir.file("m.png"));
  REQUIRE(png.size() > 8);
  CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  CHECK(decode_png(png).w == heatmap_layout(h).width);
  write_heatmap(dir.file("m.svg"), h);
  const std::string svg = read_file(dir.file("m.svg"));
  CHECK(svg.find("width='294' height='190'") != std::string::npos);
  CHECK(svg.find("&lt;eos&gt;") != std::string::npos);
  size_t cells = 0;
  for (size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1))
    ++cells;
  CHECK(cells == 6);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK_THROWS_WITH(write_heatmap(dir.file("m.jpg"), h), Catch::Contains(".png or .svg"));
}

TEST_CASE("heatmap labels and malformed heatmaps") {
  CHECK(heatmap_label(" ") == "_");
  CHECK(heatmap_label("\xc3\xa9t\xc3\xa9") == "?t?");  // "été": one mark per code point
  CHECK(heatmap_label("abcdefghijklmnop") == "abcdefghijk~");
  CHECK(heatmap_label("") == "");
  Heatmap h = sample();
  h.values.pop_back();
  CHECK_THROWS_AS(heatmap_layout(h), Error);
  h = sample();
  h.row_labels.pop_back();
  CHECK_THROWS_AS(heatmap_layout(h), Error);
  h = sample();
  h.vmax = h.vmin;
  CHECK_THROWS_AS(render_heatmap_rgb(h), Error);
  CHECK_THROWS_AS(encode_png(std::vector<uint8_t>(5), 2, 2), Error);
}

TEST_CASE("bar chart SVG: one bar per category and series, a legend") {
  BarChart c{"row",
             "key",
             "weight",
             {"1", "2", "3"},
             {{"scaled", {}, {0.2, 0.3, 0.5}, ""}, {"unscaled", {}, {0.0, 0.0, 1.0}, ""}}};
  const std::string svg = render_svg(c);
  size_t bars = 0;
  for (size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1))
    ++bars;
  CHECK(bars == 6);
  CHECK(svg.find(">scaled</text>") != std::string::npos);
  CHECK(svg.find(">unscaled</text>") != std::string::npos);
  CHECK(svg.find(">weight</text>") != std::string::npos);
}

TEST_CASE("labels are escaped the same way in charts and heatmaps") {
  CHECK(xml_escape("a<b & 'c' \"d\">") == "a&lt;b &amp; &apos;c&apos; &quot;d&quot;&gt;");
  BarChart c{"x < y & 'z'", "k", "w", {"<eos>"}, {{"s", {}, {1.0}, ""}}};
  const std::string svg = render_svg(c);
  CHECK(svg.find(">x &lt; y &amp; &apos;z&apos;</text>") != std::string::npos);
  CHECK(svg.find(">&lt;eos&gt;</text>") != std::string::npos);
}

TEST_CASE("report: min-max decimation keeps spikes, ends and at most two points per bucket") {
  Series s{"x", {}, {}, ""};
  for (int i = 0; i < 20000; ++i)
    s.x.push_back(i), s.y.push_back(i == 12345 ? 99.0 : 1.0 / (1 + i));
  const Series d = downsample(s, 500);
  CHECK(d.x.size() <= 1000);
  CHECK(d.x.size() >= 500);
  CHECK(d.x.front() == 0);
  CHECK(d.y.front() == 1.0);
  CHECK(d.x.back() == 19999);
  bool spike = false;
  for (size_t i = 0; i < d.x.size(); ++i) spike = spike || (d.x[i] == 12345 && d.y[i] == 99.0);
  CHECK(spike);
  for (size_t i = 1; i < d.x.size(); ++i) CHECK(d.x[i] > d.x[i - 1]);
  Series small{"x", {1, 2, 3}, {3, 1, 2}, ""};
  CHECK(downsample(small, 500).y == small.y);
}

TEST_CASE("report: a chart of 20000 points draws at most two per pixel column") {
  Series s{"loss", {}, {}, ""};
  for (int i = 1; i <= 20000; ++i) s.x.push_back(i), s.y.push_back(3.0 / i);
  const std::string svg = render_svg(LineChart{"t", "step", "loss", false, true, {s}}, 600, 340);
  const size_t start = svg.find("points='"), stop = svg.find('\'', start + 8);
  REQUIRE(start != std::string::npos);
  const size_t points = count(svg.substr(start, stop - start), ",");
  CHECK(points <= 2 * 600);
  CHECK(points >= 100);
}

TEST_CASE("report: ticks are exact multiples, log axes get ticks within a decade") {
  Series s{"a", {0, 1, 2}, {-1.0, 0.3, 1.0}, ""};
  const std::string lin = render_svg(LineChart{"t", "x", "y", false, false, {s}}, 600, 340);
  CHECK(lin.find("'end'>0</text>") != std::string::npos);  // 0, not 5e-17
  CHECK(lin.find("e-17") == std::string::npos);
  Series narrow{"b", {1, 2, 3}, {0.3, 0.5, 0.9}, ""};
  const std::string log = render_svg(LineChart{"t", "x", "y", false, true, {narrow}}, 600, 340);
  CHECK(log.find("'end'>0.5</text>") != std::string::npos);
}
