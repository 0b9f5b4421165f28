#include "apps/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "nn/safetensors.hpp"

namespace qkv::app {
namespace {

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string fmt(double v) {
  char buf[32];
  if (v != 0 && (std::abs(v) < 1e-3 || std::abs(v) >= 1e5))
    std::snprintf(buf, sizeof buf, "%.0e", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "Nice" tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (log) {
    for (double e = std::floor(lo); e <= std::ceil(hi) + 1e-9; e += 1) t.push_back(e);
    return t;
  }
  const double span = hi - lo, raw = span / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  return t;
}

}  // namespace

std::string render_svg(const LineChart& c, int W, int H) {
  const double ml = 70, mr = 20, mt = 40, mb = 55;
  auto tx = [&](double v) { return c.log_x ? std::log10(v) : v; };
  auto ty = [&](double v) { return c.log_y ? std::log10(v) : v; };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : c.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      const double a = tx(s.x[i]), b = ty(s.y[i]);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      x0 = std::min(x0, a), x1 = std::max(x1, a), y0 = std::min(y0, b), y1 = std::max(y1, b);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 < 1e-12) y0 -= 0.5, y1 += 0.5;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  auto px = [&](double a) { return ml + (a - x0) / (x1 - x0) * (W - ml - mr); };
  auto py = [&](double b) { return H - mb - (b - y0) / (y1 - y0) * (H - mt - mb); };

  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='15'>"
    << xml_escape(c.title) << "</text>\n";
  // axes and grid
  for (double t : ticks(x0, x1, c.log_x)) {
    if (t < x0 - 1e-9 || t > x1 + 1e-9) continue;
    o << "<line x1='" << px(t) << "' x2='" << px(t) << "' y1='" << mt << "' y2='" << H - mb
      << "' stroke='#e5e5e5'/>\n<text x='" << px(t) << "' y='" << H - mb + 16
      << "' text-anchor='middle'>" << fmt(c.log_x ? std::pow(10, t) : t) << "</text>\n";
  }
  for (double t : ticks(y0, y1, c.log_y)) {
    if (t < y0 - 1e-9 || t > y1 + 1e-9) continue;
    o << "<line x1='" << ml << "' x2='" << W - mr << "' y1='" << py(t) << "' y2='" << py(t)
      << "' stroke='#e5e5e5'/>\n<text x='" << ml - 6 << "' y='" << py(t) + 4
      << "' text-anchor='end'>" << fmt(c.log_y ? std::pow(10, t) : t) << "</text>\n";
  }
  o << "<rect x='" << ml << "' y='" << mt << "' width='" << W - ml - mr << "' height='"
    << H - mt - mb << "' fill='none' stroke='black'/>\n";
  o << "<text x='" << (ml + W - mr) / 2 << "' y='" << H - 12 << "' text-anchor='middle'>"
    << xml_escape(c.x_label) << "</text>\n";
  o << "<text transform='translate(16," << (mt + H - mb) / 2
    << ") rotate(-90)' text-anchor='middle'>" << xml_escape(c.y_label) << "</text>\n";
  // series
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    const std::string col = s.color.empty() ? kPalette[k % 6] : s.color;
    o << "<polyline fill='none' stroke='" << col << "' stroke-width='1.8' points='";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      const double a = tx(s.x[i]), b = ty(s.y[i]);
      if (std::isfinite(a) && std::isfinite(b)) o << px(a) << ',' << py(b) << ' ';
    }
    o << "'/>\n";
    if (s.x.size() <= 40)
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        const double a = tx(s.x[i]), b = ty(s.y[i]);
        if (std::isfinite(a) && std::isfinite(b))
          o << "<circle cx='" << px(a) << "' cy='" << py(b) << "' r='2.5' fill='" << col << "'/>\n";
      }
    // legend entry
    const double ly = mt + 14 + 18 * static_cast<double>(k);
    o << "<line x1='" << W - mr - 150 << "' x2='" << W - mr - 126 << "' y1='" << ly - 4 << "' y2='"
      << ly - 4 << "' stroke='" << col << "' stroke-width='2.5'/>\n<text x='" << W - mr - 120
      << "' y='" << ly << "'>" << xml_escape(s.label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void write_svg(const std::string& path, const LineChart& c, int width, int height) {
  nn::atomic_write_file(path, render_svg(c, width, height));
}

std::string render_svg(const BarChart& c, int W, int H) {
  const double ml = 70, mr = 20, mt = 40, mb = 55;
  double y1 = 0;
  for (const Series& s : c.series)
    for (double v : s.y)
      if (std::isfinite(v)) y1 = std::max(y1, v);
  if (y1 <= 0) y1 = 1;
  y1 *= 1.08;
  const double pw = W - ml - mr, ph = H - mt - mb;
  auto py = [&](double v) { return H - mb - v / y1 * ph; };
  const size_t groups = std::max<size_t>(1, c.categories.size()),
               ns = std::max<size_t>(1, c.series.size());
  const double gw = pw / static_cast<double>(groups), bw = gw * 0.8 / static_cast<double>(ns);

  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='15'>"
    << xml_escape(c.title) << "</text>\n";
  for (double t : ticks(0, y1, false)) {
    if (t > y1 + 1e-12) continue;
    o << "<line x1='" << ml << "' x2='" << W - mr << "' y1='" << py(t) << "' y2='" << py(t)
      << "' stroke='#e5e5e5'/>\n<text x='" << ml - 6 << "' y='" << py(t) + 4
      << "' text-anchor='end'>" << fmt(t) << "</text>\n";
  }
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    const std::string col = s.color.empty() ? kPalette[k % 6] : s.color;
    for (size_t g = 0; g < c.categories.size() && g < s.y.size(); ++g) {
      if (!std::isfinite(s.y[g])) continue;
      const double x = ml + gw * static_cast<double>(g) + gw * 0.1 + bw * static_cast<double>(k);
      const double v = std::max(0.0, s.y[g]);
      o << "<rect x='" << x << "' y='" << py(v) << "' width='" << bw * 0.95 << "' height='"
        << H - mb - py(v) << "' fill='" << col << "'><title>" << v << "</title></rect>\n";
    }
    const double ly = mt + 14 + 18 * static_cast<double>(k);
    o << "<rect x='" << W - mr - 150 << "' y='" << ly - 9 << "' width='18' height='10' fill='"
      << col << "'/>\n<text x='" << W - mr - 126 << "' y='" << ly << "'>" << xml_escape(s.label)
      << "</text>\n";
  }
  for (size_t g = 0; g < c.categories.size(); ++g)
    o << "<text x='" << ml + gw * (static_cast<double>(g) + 0.5) << "' y='" << H - mb + 16
      << "' text-anchor='middle'>" << xml_escape(c.categories[g]) << "</text>\n";
  o << "<rect x='" << ml << "' y='" << mt << "' width='" << pw << "' height='" << ph
    << "' fill='none' stroke='black'/>\n";
  o << "<text x='" << (ml + W - mr) / 2 << "' y='" << H - 12 << "' text-anchor='middle'>"
    << xml_escape(c.x_label) << "</text>\n";
  o << "<text transform='translate(16," << (mt + H - mb) / 2
    << ") rotate(-90)' text-anchor='middle'>" << xml_escape(c.y_label) << "</text>\n</svg>\n";
  return o.str();
}

void write_svg(const std::string& path, const BarChart& c, int width, int height) {
  nn::atomic_write_file(path, render_svg(c, width, height));
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '\'')
      o += "&apos;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

}  // namespace qkv::app
