#include "config/toml_ascii.hpp"

namespace qkv::config {
namespace {

enum class Where { code, comment, basic, literal, ml_basic, ml_literal };

// Walks the text once, one state per kind of span; in basic strings a backslash escapes the
// next byte (\" and \\ do not end or begin anything).
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  // The first byte >= 0x80 in code (stop_non_ascii), or the first '.' in code past max_dots on
  // its line.
  std::optional<TextPos> run(bool stop_non_ascii, std::size_t max_dots) {
    std::size_t dots = 0, line = 1;
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (pos_.line != line) line = pos_.line, dots = 0;
      if (where_ == Where::code && stop_non_ascii && c >= 0x80) return pos_;
      if (where_ == Where::code && c == '.' && ++dots > max_dots) return pos_;
      step(c);
    }
    return std::nullopt;
  }

 private:
  bool at(std::string_view token) const { return s_.substr(i_, token.size()) == token; }

  void advance(std::size_t n) {
    for (std::size_t k = 0; k < n && i_ < s_.size(); ++k, ++i_) {
      if (s_[i_] == '\n') {
        ++pos_.line;
        pos_.column = 1;
      } else {
        ++pos_.column;
      }
    }
  }

  // A multi-line string ends at its last three quotes: up to two more belong to its content.
  void close_multiline(char q) {
    std::size_t run = 0;
    while (i_ + run < s_.size() && s_[i_ + run] == q) ++run;
    advance(run);
    where_ = Where::code;
  }

  void step(unsigned char c) {
    switch (where_) {
      case Where::code:
        return step_code(c);
      case Where::comment:
        if (c == '\n') where_ = Where::code;
        return advance(1);
      case Where::basic:
        if (c == '\\') return advance(2);
        if (c == '"' || c == '\n') where_ = Where::code;
        return advance(1);
      case Where::literal:
        if (c == '\'' || c == '\n') where_ = Where::code;
        return advance(1);
      case Where::ml_basic:
        if (c == '\\') return advance(2);
        if (at("\"\"\"")) return close_multiline('"');
        return advance(1);
      case Where::ml_literal:
        if (at("'''")) return close_multiline('\'');
        return advance(1);
    }
  }

  void step_code(unsigned char c) {
    if (c == '#') {
      where_ = Where::comment;
      return advance(1);
    }
    if (at("\"\"\"") || at("'''")) {
      where_ = c == '"' ? Where::ml_basic : Where::ml_literal;
      return advance(3);
    }
    if (c == '"') where_ = Where::basic;
    if (c == '\'') where_ = Where::literal;
    advance(1);
  }

  std::string_view s_;
  std::size_t i_ = 0;
  TextPos pos_;
  Where where_ = Where::code;
};

}  // namespace

namespace {

std::optional<TextPos> scan(std::string_view toml, bool stop_non_ascii, std::size_t max_dots) {
  // A UTF-8 byte order mark may open the file (TOML 1.0 and toml++ skip it).
  constexpr std::string_view bom = "\xEF\xBB\xBF";
  if (toml.substr(0, bom.size()) == bom) {
    std::optional<TextPos> p = Scanner(toml.substr(bom.size())).run(stop_non_ascii, max_dots);
    if (p && p->line == 1) p->column += bom.size();
    return p;
  }
  return Scanner(toml).run(stop_non_ascii, max_dots);
}

}  // namespace

std::optional<TextPos> first_non_ascii_outside_strings(std::string_view toml) {
  return scan(toml, true, std::string_view::npos);
}

std::optional<TextPos> first_dot_past(std::string_view toml, std::size_t max_dots) {
  return scan(toml, false, max_dots);
}

}  // namespace qkv::config
