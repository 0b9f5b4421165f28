#include "figures/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/atomic_file.hpp"

namespace qkv::figures {
namespace {

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

// A tick label: one significant digit in exponent form for very small or large values.
std::string fmt(double v) {
  if (v == 0 || (std::abs(v) >= 1e-3 && std::abs(v) < 1e5)) return general(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0e", v);
  return buf;
}

// "Nice" tick values covering [lo, hi]: about five on a linear axis (each an exact multiple of
// the step, so 0 prints as "0"), one per decade on a log axis (every k-th when there are more
// than eight decades).
std::vector<double> ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (log) {
    const double first = std::floor(lo), last = std::ceil(hi);
    const double every = std::max(1.0, std::ceil((last - first + 1) / 8));
    for (double e = std::ceil(first / every) * every; e <= last + 1e-9; e += every) t.push_back(e);
    // Less than a decade or two in view: 1, 2, 5 (else 1..9) times the powers of ten too.
    for (const std::vector<double>& mantissas :
         {std::vector<double>{1, 2, 5}, std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
      int inside = 0;
      for (double v : t) inside += v >= lo - 1e-9 && v <= hi + 1e-9;
      if (inside >= 3) break;
      t.clear();
      for (double e = first; e <= last; e += 1)
        for (double m : mantissas) t.push_back(e + std::log10(m));
    }
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
  for (double k = std::ceil(lo / step); k * step <= hi + step * 1e-9; k += 1)
    t.push_back(std::abs(k) < 0.5 ? 0.0 : k * step);
  return t;
}

// Width of text in pixels at font size `size` (sans-serif averages about 0.6 em per character;
// an overestimate is safe, it only leaves more room).
double text_width(const std::string& s, double size = 12) {
  return 0.6 * size * static_cast<double>(s.size());
}

// The title as drawn: its font size and text, cut with "..." when it does not fit in `room`.
std::pair<int, std::string> fit_title(const std::string& t, double room) {
  if (text_width(t, 15) <= room) return {15, t};
  if (text_width(t, 13) <= room) return {13, t};
  const size_t keep = static_cast<size_t>(std::max(4.0, room / (0.6 * 13) - 3));
  return {13, t.substr(0, keep) + "..."};
}

// Min-max decimation: at most two points (the lowest and the highest, in order) per bucket of
// equal x width, so spikes survive and the drawn line looks as it would with every point.
void decimate(std::vector<double>& x, std::vector<double>& y, size_t buckets) {
  const size_t n = std::min(x.size(), y.size());
  if (buckets == 0 || n <= 2 * buckets) return;
  double x0 = INFINITY, x1 = -INFINITY;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) x0 = std::min(x0, x[i]), x1 = std::max(x1, x[i]);
  if (!(x1 > x0)) return;
  std::vector<double> ox, oy;
  size_t i = 0;
  while (i < n) {
    const auto bucket = [&](size_t k) {
      const double f = (x[k] - x0) / (x1 - x0) * static_cast<double>(buckets);
      return std::min(buckets - 1, static_cast<size_t>(std::max(0.0, f)));
    };
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      ++i;
      continue;
    }
    const size_t b = bucket(i);
    size_t lo = i, hi = i, j = i;
    for (; j < n && (!std::isfinite(x[j]) || bucket(j) == b); ++j) {
      if (!std::isfinite(y[j]) || !std::isfinite(x[j])) continue;
      if (y[j] < y[lo]) lo = j;
      if (y[j] > y[hi]) hi = j;
    }
    for (size_t k : {std::min(lo, hi), std::max(lo, hi)}) {
      if (k == std::max(lo, hi) && lo == hi) break;
      ox.push_back(x[k]), oy.push_back(y[k]);
    }
    i = j;
  }
  x.swap(ox), y.swap(oy);
}

}  // namespace

std::string general(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Series downsample(const Series& s, size_t buckets) {
  Series out = s;
  decimate(out.x, out.y, buckets);
  return out;
}

bool spans_decades(const std::vector<Series>& series, double ratio) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series)
    for (double v : s.y) {
      if (!std::isfinite(v)) continue;
      if (v <= 0) return false;
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
  return std::isfinite(lo) && hi / lo >= ratio;
}

std::string render_svg(const LineChart& c, int W, int H) {
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

  // Tick labels first: the left margin makes room for the widest one.
  std::vector<std::pair<double, std::string>> xt, yt;
  for (double t : ticks(x0, x1, c.log_x))
    if (t >= x0 - 1e-9 && t <= x1 + 1e-9) xt.push_back({t, fmt(c.log_x ? std::pow(10, t) : t)});
  for (double t : ticks(y0, y1, c.log_y))
    if (t >= y0 - 1e-9 && t <= y1 + 1e-9) yt.push_back({t, fmt(c.log_y ? std::pow(10, t) : t)});
  double widest = 0;
  for (const auto& t : yt) widest = std::max(widest, text_width(t.second));
  const double ml = std::max(60.0, 36 + widest), mr = 20, mt = 40;
  double mb = 55;

  // The legend: in rows under the x label, never over the data.
  std::vector<std::pair<double, double>> legend_at;  // each entry's left end and baseline
  if (!c.series.empty()) {
    double x = ml, row = 0;
    for (const Series& s : c.series) {
      const double w = 30 + text_width(s.label) + 16;
      if (x > ml && x + w > W - mr) x = ml, row += 1;
      legend_at.push_back({x, row});
      x += w;
    }
    mb += 18 * (row + 1);
    for (auto& e : legend_at) e.second = H - 18 * (row + 1) + 18 * e.second + 8;
  }
  auto px = [&](double a) { return ml + (a - x0) / (x1 - x0) * (W - ml - mr); };
  auto py = [&](double b) { return H - mb - (b - y0) / (y1 - y0) * (H - mt - mb); };
  // x tick labels: every k-th so neighbours keep a gap.
  double xw = 0;
  for (const auto& t : xt) xw = std::max(xw, text_width(t.second));
  const size_t every =
      xt.size() < 2 ? 1
                    : static_cast<size_t>(
                          std::ceil((xw + 12) / std::max(1.0, px(xt[1].first) - px(xt[0].first))));

  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' viewBox='0 0 " << W << ' ' << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  const auto [title_size, title] = fit_title(c.title, W - 20);
  o << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='" << title_size << "'>"
    << xml_escape(title) << "</text>\n";
  // axes and grid
  for (size_t i = 0; i < xt.size(); ++i) {
    o << "<line x1='" << px(xt[i].first) << "' x2='" << px(xt[i].first) << "' y1='" << mt
      << "' y2='" << H - mb << "' stroke='#e5e5e5'/>\n";
    if (i % every == 0)
      o << "<text x='" << px(xt[i].first) << "' y='" << H - mb + 16 << "' text-anchor='middle'>"
        << xt[i].second << "</text>\n";
  }
  for (const auto& [t, label] : yt)
    o << "<line x1='" << ml << "' x2='" << W - mr << "' y1='" << py(t) << "' y2='" << py(t)
      << "' stroke='#e5e5e5'/>\n<text x='" << ml - 6 << "' y='" << py(t) + 4
      << "' text-anchor='end'>" << label << "</text>\n";
  o << "<rect x='" << ml << "' y='" << mt << "' width='" << W - ml - mr << "' height='"
    << H - mt - mb << "' fill='none' stroke='black'/>\n";
  o << "<text x='" << (ml + W - mr) / 2 << "' y='" << H - mb + 40 << "' text-anchor='middle'>"
    << xml_escape(c.x_label) << "</text>\n";
  // The y label along the plot's height: smaller type when long, cut when still too long.
  const double room = H - mt - mb;
  const double ysize = std::clamp(room / std::max(1.0, text_width(c.y_label, 1)), 9.0, 12.0);
  std::string ylab = c.y_label;
  if (text_width(ylab, ysize) > room)
    ylab = ylab.substr(0, static_cast<size_t>(std::max(4.0, room / (0.6 * ysize) - 3))) + "...";
  o << "<text transform='translate(16," << (mt + H - mb) / 2 << ") rotate(-90)' font-size='"
    << ysize << "' text-anchor='middle'>" << xml_escape(ylab) << "</text>\n";
  // series: at most two points per pixel column (min and max), so a long run draws fast
  const size_t columns = static_cast<size_t>(std::max(1.0, W - ml - mr));
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    const std::string col = s.color.empty() ? kPalette[k % 6] : s.color;
    std::vector<double> xs, ys;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      const double a = tx(s.x[i]), b = ty(s.y[i]);
      if (std::isfinite(a) && std::isfinite(b)) xs.push_back(a), ys.push_back(b);
    }
    const bool dots = xs.size() <= 40;
    decimate(xs, ys, columns);
    o << "<polyline fill='none' stroke='" << col << "' stroke-width='1.8' points='";
    char buf[48];
    for (size_t i = 0; i < xs.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(xs[i]), py(ys[i]));
      o << buf;
    }
    o << "'/>\n";
    if (dots)
      for (size_t i = 0; i < xs.size(); ++i)
        o << "<circle cx='" << px(xs[i]) << "' cy='" << py(ys[i]) << "' r='2.5' fill='" << col
          << "'/>\n";
  }
  // legend
  for (size_t k = 0; k < c.series.size() && k < legend_at.size(); ++k) {
    const std::string col = c.series[k].color.empty() ? kPalette[k % 6] : c.series[k].color;
    const auto [lx, ly] = legend_at[k];
    o << "<line x1='" << lx << "' x2='" << lx + 24 << "' y1='" << ly - 4 << "' y2='" << ly - 4
      << "' stroke='" << col << "' stroke-width='2.5'/>\n<text x='" << lx + 30 << "' y='" << ly
      << "'>" << xml_escape(c.series[k].label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void write_svg(const std::string& path, const LineChart& c, int width, int height) {
  atomic_write_file(path, render_svg(c, width, height));
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
  atomic_write_file(path, render_svg(c, width, height));
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

}  // namespace qkv::figures
