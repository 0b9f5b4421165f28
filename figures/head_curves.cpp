#include "figures/head_curves.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.hpp"
#include "figures/plot.hpp"

namespace qkv::figures {
namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The last finite value of a curve (NaN when none).
double last_finite(const std::vector<double>& v) {
  for (auto it = v.rbegin(); it != v.rend(); ++it)
    if (std::isfinite(*it)) return *it;
  return NAN;
}

// One panel's polyline; the curve breaks at a non-finite value.
std::string panel_path(const std::vector<double>& steps, const std::vector<double>& y, double x0,
                       double x1, double y0, double y1, double left, double top, double w,
                       double h) {
  std::ostringstream o;
  bool pen_down = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!std::isfinite(y[i])) {
      pen_down = false;
      continue;
    }
    const double fx = x1 > x0 ? (steps[i] - x0) / (x1 - x0) : 0.5;
    const double fy = std::clamp((y[i] - y0) / (y1 - y0), 0.0, 1.0);
    o << (pen_down ? " L" : " M") << fixed(left + fx * w, 1) << ' ' << fixed(top + (1 - fy) * h, 1);
    pen_down = true;
  }
  return o.str();
}

}  // namespace

std::string render_svg(const HeadCurves& c, int cell_width, int cell_height) {
  const size_t n_heads = static_cast<size_t>(std::max<int64_t>(0, c.layers * c.heads));
  QKV_CHECK(c.layers > 0 && c.heads > 0 && c.values.size() == n_heads, "head curves",
            "need layers * heads curves: layers " + std::to_string(c.layers) + ", heads " +
                std::to_string(c.heads) + ", curves " + std::to_string(c.values.size()));
  for (const std::vector<double>& v : c.values)
    QKV_CHECK(v.size() == c.steps.size(), "head curves",
              "a curve has " + std::to_string(v.size()) + " points for " +
                  std::to_string(c.steps.size()) + " steps");
  const double y0 = c.y_min, y1 = c.y_max > c.y_min ? c.y_max : c.y_min + 1;
  double x0 = INFINITY, x1 = -INFINITY;
  for (double s : c.steps) x0 = std::min(x0, s), x1 = std::max(x1, s);
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;

  const double ml = 36, mt = 46, gap = 6, mb = 30;
  const std::string range = "steps " + general(x0) + " to " + general(x1) + ", y " + fixed(y0, 2) +
                            " to " + fixed(y1, 2) + ": " + c.y_label;
  // Wide enough for the grid, the title and the range line (about 0.6 em per character).
  const double grid_width = ml + static_cast<double>(c.heads) * (cell_width + gap) + 10;
  const double W = std::max({grid_width, 0.6 * 13 * static_cast<double>(c.title.size()) + 20,
                             ml + 0.6 * 11 * static_cast<double>(range.size()) + 10});
  const double H = mt + static_cast<double>(c.layers) * (cell_height + gap) + mb;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n<text x='"
    << W / 2 << "' y='16' text-anchor='middle' font-size='13'>" << xml_escape(c.title)
    << "</text>\n";
  for (int64_t h = 0; h < c.heads; ++h)
    o << "<text x='" << ml + static_cast<double>(h) * (cell_width + gap) + cell_width / 2.0
      << "' y='" << mt - 6 << "' text-anchor='middle'>head " << h << "</text>\n";
  for (int64_t l = 0; l < c.layers; ++l) {
    const double top = mt + static_cast<double>(l) * (cell_height + gap);
    o << "<text x='" << ml - 6 << "' y='" << top + cell_height / 2.0 + 4 << "' text-anchor='end'>L"
      << l << "</text>\n";
    for (int64_t h = 0; h < c.heads; ++h) {
      const size_t k = static_cast<size_t>(l * c.heads + h);
      const double left = ml + static_cast<double>(h) * (cell_width + gap);
      const std::string link = k < c.links.size() ? c.links[k] : "";
      if (!link.empty()) o << "<a href='" << xml_escape(link) << "'>";
      o << "<g class='head' data-layer='" << l << "' data-head='" << h << "'><rect x='" << left
        << "' y='" << top << "' width='" << cell_width << "' height='" << cell_height
        << "' fill='#fafafa' stroke='#ccc'/>\n<path fill='none' stroke='#1f77b4' "
           "stroke-width='1.5' d='"
        << panel_path(c.steps, c.values[k], x0, x1, y0, y1, left, top, cell_width, cell_height)
        << "'/>\n";
      const double last = last_finite(c.values[k]);
      if (std::isfinite(last))
        o << "<text x='" << left + cell_width - 3 << "' y='" << top + 12
          << "' text-anchor='end' fill='#555'>" << fixed(last, 2) << "</text>\n";
      o << "</g>";
      if (!link.empty()) o << "</a>";
      o << "\n";
    }
  }
  o << "<text x='" << ml << "' y='" << H - 10 << "' fill='#555'>" << xml_escape(range)
    << "</text>\n</svg>\n";
  return o.str();
}

}  // namespace qkv::figures
