// qkv report, the page itself: HTML text from sections, tables and figures (see report.hpp).
// The page loads nothing: a Content-Security-Policy forbids every fetch except data: images
// and the inline style sheet, so a browser says so if anything ever tries.
#include <sstream>

#include "figures/report.hpp"

namespace qkv::figures::report {

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string base64(const std::string& bytes) {
  static const char* kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string o;
  o.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    for (int s = 18; s >= 0; s -= 6) o += kDigits[(v >> s) & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    const uint32_t v = at(i) << 16 | (rest == 2 ? at(i + 1) << 8 : 0);
    o += kDigits[(v >> 18) & 63];
    o += kDigits[(v >> 12) & 63];
    o += rest == 2 ? kDigits[(v >> 6) & 63] : '=';
    o += '=';
  }
  return o;
}

std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::string& css_class) {
  std::ostringstream o;
  o << "<div class=\"scroll\"><table" << (css_class.empty() ? "" : " class=\"" + css_class + "\"")
    << ">\n<thead><tr>";
  for (const std::string& h : header) o << "<th>" << h << "</th>";
  o << "</tr></thead>\n<tbody>\n";
  for (const auto& r : rows) {
    o << "<tr>";
    for (const std::string& c : r) o << "<td>" << c << "</td>";
    o << "</tr>\n";
  }
  o << "</tbody></table></div>\n";
  return o.str();
}

std::string chart_figure(const std::string& id, const std::string& svg, const std::string& kind) {
  return "<figure class=\"chart\" id=\"" + html_escape(id) + "\" data-kind=\"" + kind + "\">\n" +
         svg + "</figure>\n";
}

std::string image_figure(const std::string& png, int width, int height, const std::string& alt,
                         const std::string& caption) {
  std::ostringstream o;
  o << "<figure class=\"map\"><img src=\"data:image/png;base64," << base64(png) << "\" width=\""
    << width << "\" height=\"" << height << "\" alt=\"" << html_escape(alt) << "\">";
  if (!caption.empty()) o << "<figcaption>" << html_escape(caption) << "</figcaption>";
  o << "</figure>\n";
  return o.str();
}

namespace {

const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 24px 40px;
  color: #222; line-height: 1.4; }
header { border-bottom: 1px solid #ddd; padding: 12px 0 8px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 10px; border-bottom: 1px solid #eee; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
.sub { color: #555; margin: 0 0 6px; font-size: 14px; }
nav a { margin-right: 14px; font-size: 14px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 12px; }
figure { margin: 0; }
figure.chart svg { width: 100%; max-width: 600px; height: auto; display: block;
  border: 1px solid #eee; }
.heads { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
figure.chart[data-kind=heads] svg { width: auto; max-width: 100%; }
.maps { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
figure.map img { max-width: 100%; height: auto; border: 1px solid #eee; }
figure.map figcaption { font-size: 12px; color: #555; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
td.num, table.num td { font-variant-numeric: tabular-nums; }
.missing { color: #a33; }
.ok { color: #1a7f37; font-weight: bold; }
.bad { color: #a33; font-weight: bold; }
pre { background: #f7f7f7; padding: 8px; font-size: 12px; overflow-x: auto; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
details { margin: 6px 0; }
footer { margin-top: 30px; color: #777; font-size: 12px; }
)";

}  // namespace

std::string render_page(const std::string& title, const std::string& subtitle,
                        const std::vector<Section>& sections, int64_t charts) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "img-src data:; style-src 'unsafe-inline'\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
    << html_escape(title) << "</title>\n<style>" << kStyle
    << "</style>\n</head>\n<body>\n<header>\n<h1>" << html_escape(title)
    << "</h1>\n<p class=\"sub\">" << subtitle << "</p>\n<nav>";
  for (const Section& s : sections)
    o << "<a href=\"#" << html_escape(s.id) << "\">" << html_escape(s.heading) << "</a>";
  o << "</nav>\n</header>\n<main data-charts=\"" << charts << "\">\n";
  for (const Section& s : sections)
    o << "<section id=\"" << html_escape(s.id) << "\">\n<h2>" << html_escape(s.heading) << "</h2>\n"
      << s.html << "</section>\n";
  o << "</main>\n<footer>Written by qkv report: one file, no scripts, nothing loaded from the "
       "network.</footer>\n</body>\n</html>\n";
  return o.str();
}

}  // namespace qkv::figures::report
