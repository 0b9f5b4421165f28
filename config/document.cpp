#include "config/document.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "config/toml_ascii.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/utf8.hpp"

namespace qkv::config {
namespace {

std::string at(const std::string& path, const toml::source_region& s) {
  return path + ":" + std::to_string(s.begin.line);
}

// No qkv key nests deeper than a value in a section (optim.betas = [0.9, 0.999]: 3 levels);
// the conversion below recurses once per level, so a deeper document is refused before it
// could exhaust the stack (a key of 100,000 dotted parts).
constexpr int kMaxConfigDepth = 16;
// toml++ nests one table per part of a dotted key, recursing as it does (toml_ascii.hpp).
constexpr size_t kMaxDotsPerLine = 256;

ojson to_json(const toml::node& n, const std::string& key, ConfigDoc& doc, int depth = 1);

// A table's entries in the order the file wrote them (toml++ keeps them sorted by name): the
// first unknown key reported is the first one written.
ojson table_to_json(const toml::table& t, const std::string& prefix, ConfigDoc& doc,
                    int depth = 1) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [k, v] : t) entries.emplace_back(&k, &v);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& x = a.second->source().begin;
    const auto& y = b.second->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  ojson out = ojson::object();
  for (const auto& [k, v] : entries) {
    const std::string full =
        prefix.empty() ? std::string(k->str()) : prefix + "." + std::string(k->str());
    doc.lines[full] = static_cast<int>(v->source().begin.line);
    out[std::string(k->str())] = to_json(*v, full, doc, depth + 1);
  }
  return out;
}

ojson to_json(const toml::node& n, const std::string& key, ConfigDoc& doc, int depth) {
  if (depth > kMaxConfigDepth && (n.is_table() || n.is_array()))
    throw Error(at(doc.path, n.source()) + ": " + key.substr(0, key.find('.')) +
                ": tables or arrays nested deeper than " + std::to_string(kMaxConfigDepth) +
                " levels, which no qkv key takes");
  switch (n.type()) {
    case toml::node_type::table:
      return table_to_json(*n.as_table(), key, doc, depth);
    case toml::node_type::array: {
      ojson a = ojson::array();
      for (const toml::node& e : *n.as_array()) a.push_back(to_json(e, key, doc, depth + 1));
      return a;
    }
    case toml::node_type::string:
      return n.as_string()->get();
    case toml::node_type::integer:
      return n.as_integer()->get();
    case toml::node_type::floating_point:
      return n.as_floating_point()->get();
    case toml::node_type::boolean:
      return n.as_boolean()->get();
    default:  // date, time, date-time
      throw Error(at(doc.path, n.source()) + ": " + key +
                  ": a date or time, which no qkv key takes (strings need quotes)");
  }
}

// ojson -> toml++ node (the values of an effective config: no dates).
std::unique_ptr<toml::node> to_toml(const ojson& v) {
  if (v.is_string()) return std::make_unique<toml::value<std::string>>(v.get<std::string>());
  if (v.is_boolean()) return std::make_unique<toml::value<bool>>(v.get<bool>());
  if (v.is_number_unsigned()) {
    QKV_CHECK(v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), "write_config", "integer ",
              v.dump(), " does not fit TOML's 64-bit signed integers");
    return std::make_unique<toml::value<int64_t>>(static_cast<int64_t>(v.get<uint64_t>()));
  }
  if (v.is_number_integer()) return std::make_unique<toml::value<int64_t>>(v.get<int64_t>());
  if (v.is_number_float()) return std::make_unique<toml::value<double>>(v.get<double>());
  if (v.is_array()) {
    auto a = std::make_unique<toml::array>();
    for (const ojson& e : v) a->push_back(std::move(*to_toml(e)));
    return a;
  }
  if (v.is_object()) {
    auto t = std::make_unique<toml::table>();
    t->is_inline(true);
    for (auto it = v.begin(); it != v.end(); ++it) t->insert(it.key(), std::move(*to_toml(*it)));
    return t;
  }
  throw Error("write_config: " + v.dump() + " has no TOML spelling");
}

// One value as toml++ writes it: basic one-line strings with escapes, full float precision.
std::string toml_text(const ojson& v) {
  std::ostringstream os;
  const std::unique_ptr<toml::node> n = to_toml(v);
  os << toml::toml_formatter(*n, toml::format_flags::none);
  return os.str();
}

}  // namespace

ConfigDoc parse_config(const std::string& text, const std::string& path) {
  ConfigDoc doc;
  doc.path = path;
  if (const auto p = first_non_ascii_outside_strings(text))
    throw Error(path + ":" + std::to_string(p->line) + ":" + std::to_string(p->column) +
                ": a non-ASCII character outside a string or comment (TOML keys and values are "
                "ASCII unless quoted)");
  if (const auto p = first_dot_past(text, kMaxDotsPerLine))
    throw Error(path + ":" + std::to_string(p->line) + ":" + std::to_string(p->column) +
                ": more than " + std::to_string(kMaxDotsPerLine) +
                " dots on one line outside strings (a key nested that deep, which no qkv key "
                "is)");
  toml::table t;
  try {
    t = toml::parse(std::string_view(text), std::string_view(path));
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw Error(path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                std::string(e.description()));
  }
  doc.root = table_to_json(t, "", doc);
  return doc;
}

ConfigDoc read_config_file(const std::string& path) {
  InputRules rules;
  rules.what = "config file";
  rules.max_bytes = kMaxConfigBytes;
  return parse_config(read_input(path, rules), path);
}

ojson parse_value_or_string(const std::string& text) {
  QKV_CHECK(data::valid_utf8(text), "command line", "value is not valid UTF-8");
  // Unquoted non-ASCII text is a string, never TOML (and toml++ must not see it, toml_ascii.hpp).
  if (first_non_ascii_outside_strings(text)) return text;
  if (first_dot_past(text, kMaxDotsPerLine)) return text;  // no value of a qkv key is this deep
  try {
    const toml::table t =
        toml::parse(std::string_view("v = " + text), std::string_view("command line"));
    const toml::node* v = t.get("v");
    if (t.size() == 1 && v != nullptr && !v->is_date() && !v->is_time() && !v->is_date_time()) {
      ConfigDoc scratch;
      return to_json(*v, "v", scratch);
    }
  } catch (const toml::parse_error&) {
  } catch (const Error&) {  // nested past kMaxConfigDepth: no key takes it, as a string neither
  }
  return text;
}

std::string write_config(const ojson& root) {
  std::string out;
  for (auto it = root.begin(); it != root.end(); ++it)
    if (!it.value().is_object()) out += it.key() + " = " + toml_text(it.value()) + "\n";
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it.value().is_object()) continue;
    out += "\n[" + it.key() + "]\n";
    for (auto kv = it.value().begin(); kv != it.value().end(); ++kv)
      out += kv.key() + " = " + toml_text(kv.value()) + "\n";
  }
  return out;
}

}  // namespace qkv::config
