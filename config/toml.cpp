#include "config/toml.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/error.hpp"
#include "data/utf8.hpp"

namespace qkv::app {
namespace {

struct Cursor {
  const std::string& s;
  size_t i = 0;
  const std::string& path;
  int line;
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(path + ":" + std::to_string(line) + ": " + why);
  }
  bool done() const { return i >= s.size(); }
  char peek() const { return done() ? '\0' : s[i]; }
  void skip_space() {
    while (!done() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
};

bool is_bare(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

std::string parse_key(Cursor& c) {
  c.skip_space();
  std::string k;
  while (!c.done() && is_bare(c.peek())) k += c.s[c.i++];
  if (k.empty()) c.fail("expected a key (letters, digits, _ or -)");
  return k;
}

ojson parse_value(Cursor& c, int depth = 0);

ojson parse_string(Cursor& c) {
  const char q = c.s[c.i++];
  std::string out;
  while (true) {
    if (c.done()) c.fail("unterminated string");
    char ch = c.s[c.i++];
    if (ch == q) break;
    if (ch == '\n') c.fail("unterminated string");
    if (ch == '\\' && q == '"') {
      if (c.done()) c.fail("unterminated string");
      const char e = c.s[c.i++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case 'u': {
          if (c.i + 4 > c.s.size()) c.fail("bad \\u escape");
          uint32_t cp = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = c.s[c.i++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) c.fail("bad \\u escape");
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                     ? h - '0'
                                                     : (std::tolower(h) - 'a' + 10));
          }
          if (cp >= 0xD800 && cp < 0xE000) c.fail("bad \\u escape (surrogate)");
          data::append_utf8(out, static_cast<char32_t>(cp));
          break;
        }
        default:
          c.fail(std::string("unknown escape \\") + e);
      }
    } else {
      out += ch;
    }
  }
  return out;
}

ojson parse_scalar_word(Cursor& c) {
  std::string w;
  while (!c.done() && c.peek() != ',' && c.peek() != ']' && c.peek() != '#' && c.peek() != ' ' &&
         c.peek() != '\t' && c.peek() != '\n' && c.peek() != '\r')
    w += c.s[c.i++];
  if (w.empty()) c.fail("expected a value");
  if (w == "true") return true;
  if (w == "false") return false;
  if (w == "inf" || w == "+inf") return INFINITY;
  if (w == "-inf") return -INFINITY;
  if (w == "nan" || w == "+nan" || w == "-nan") return NAN;
  std::string digits;
  for (char ch : w)
    if (ch != '_') digits += ch;
  const bool is_float = digits.find_first_of(".eE") != std::string::npos;
  size_t used = 0;
  try {
    if (is_float) {
      const double d = std::stod(digits, &used);
      if (used == digits.size()) return d;
    } else {
      const long long v = std::stoll(digits, &used, 10);
      if (used == digits.size()) return static_cast<int64_t>(v);
    }
  } catch (const std::exception&) {
  }
  c.fail("'" + w + "' is not a TOML value (strings need quotes)");
}

ojson parse_value(Cursor& c, int depth) {
  c.skip_space();
  if (c.done()) c.fail("expected a value");
  const char ch = c.peek();
  if (ch == '"' || ch == '\'') return parse_string(c);
  if (ch == '[') {
    if (depth > 16) c.fail("arrays nested too deeply");
    ++c.i;
    ojson arr = ojson::array();
    while (true) {
      c.skip_space();
      if (c.peek() == ']') {
        ++c.i;
        break;
      }
      arr.push_back(parse_value(c, depth + 1));
      c.skip_space();
      if (c.peek() == ',') {
        ++c.i;
      } else if (c.peek() == ']') {
        ++c.i;
        break;
      } else {
        c.fail("expected ',' or ']' in an array (arrays must be on one line)");
      }
    }
    return arr;
  }
  if (ch == '{') c.fail("inline tables are not supported; use a [section]");
  return parse_scalar_word(c);
}

void expect_line_end(Cursor& c) {
  c.skip_space();
  if (c.peek() == '\r') ++c.i;
  if (!c.done() && c.peek() != '#' && c.peek() != '\n')
    c.fail("unexpected text after the value: '" + c.s.substr(c.i, c.s.find('\n', c.i) - c.i) + "'");
}

}  // namespace

TomlDoc parse_toml(const std::string& text_in, const std::string& path) {
  TomlDoc doc;
  doc.path = path;
  std::string section;
  // A UTF-8 byte order mark (editors on Windows write one) is not part of the first key.
  const bool bom = text_in.rfind("\xEF\xBB\xBF", 0) == 0;
  std::istringstream in(bom ? text_in.substr(3) : text_in);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    Cursor c{line, 0, path, lineno};
    // TOML is UTF-8; checked up front so no invalid string reaches JSON (whose dump throws).
    if (size_t bad = 0; !data::valid_utf8(line, &bad))
      c.fail("invalid UTF-8 at byte " + std::to_string(bad + 1) +
             " of the line (TOML files are UTF-8)");
    c.skip_space();
    if (c.done() || c.peek() == '#' || c.peek() == '\r') continue;
    if (c.peek() == '[') {
      ++c.i;
      if (c.peek() == '[') c.fail("arrays of tables ([[...]]) are not supported");
      section = parse_key(c);
      c.skip_space();
      if (c.peek() != ']') c.fail("expected ']' after the section name (one level only)");
      ++c.i;
      expect_line_end(c);
      if (doc.root.contains(section))
        c.fail("section [" + section + "] appears twice (or clashes with a key)");
      doc.root[section] = ojson::object();
      doc.lines[section] = lineno;
      continue;
    }
    const std::string key = parse_key(c);
    c.skip_space();
    if (c.peek() != '=') c.fail("expected '=' after key '" + key + "'");
    ++c.i;
    ojson value = parse_value(c);
    expect_line_end(c);
    ojson& table = section.empty() ? doc.root : doc.root[section];
    const std::string full = section.empty() ? key : section + "." + key;
    if (table.contains(key)) c.fail("key '" + full + "' is set twice");
    table[key] = std::move(value);
    doc.lines[full] = lineno;
  }
  return doc;
}

TomlDoc read_toml_file(const std::string& path) {
  // A directory, FIFO or device is not a config (reading a FIFO would wait forever, a device
  // like /dev/zero never ends): refused before opening it.
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0)
    throw Error(path + ": cannot read the config file (" + std::strerror(errno) + ")");
  if (!S_ISREG(sb.st_mode))
    throw Error(path + ": not a config file (it is " +
                (S_ISDIR(sb.st_mode)                          ? "a directory"
                 : S_ISFIFO(sb.st_mode)                       ? "a FIFO"
                 : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                              : "not a regular file") +
                ")");
  if (sb.st_size > (int64_t{16} << 20))
    throw Error(path + ": " + std::to_string(sb.st_size) +
                " bytes is too large for a config file (at most 16 MB)");
  std::ifstream f(path);
  if (!f) throw Error(path + ": cannot read the config file (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_toml(ss.str(), path);
}

ojson parse_toml_value_or_string(const std::string& text) {
  const std::string path = "(command line)";
  QKV_CHECK(data::valid_utf8(text), "command line", "value is not valid UTF-8");
  Cursor c{text, 0, path, 0};
  try {
    ojson v = parse_value(c);
    c.skip_space();
    if (c.done()) return v;
  } catch (const Error&) {
  }
  return text;
}

namespace {

std::string toml_value(const ojson& v) {
  if (v.is_string()) return v.dump();  // JSON string escapes are valid TOML basic strings
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    std::ostringstream os;
    os << std::setprecision(17) << d;
    std::string s = os.str();
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // stays a float
    return s;
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + toml_value(v[i]);
    return s + "]";
  }
  return v.dump();
}

}  // namespace

std::string write_toml(const ojson& root) {
  std::string out;
  for (auto it = root.begin(); it != root.end(); ++it)
    if (!it.value().is_object()) out += it.key() + " = " + toml_value(it.value()) + "\n";
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it.value().is_object()) continue;
    out += "\n[" + it.key() + "]\n";
    for (auto kv = it.value().begin(); kv != it.value().end(); ++kv)
      out += kv.key() + " = " + toml_value(kv.value()) + "\n";
  }
  return out;
}

}  // namespace qkv::app
