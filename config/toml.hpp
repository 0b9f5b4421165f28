// A reader for the TOML that qkv's configs use, into JSON, keeping each key's line for errors.
//
// Supported: comments, [section] tables (one level), bare keys, strings ("..." with the usual
// escapes, and '...'), integers, floats (incl. inf and nan), booleans, one-line arrays of
// those. Anything else is an error "FILE:LINE: what is wrong", never a crash.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::app {

using ojson = nlohmann::ordered_json;

struct TomlDoc {
  ojson root = ojson::object();      // {"seed": 1, "model": {"d_model": 128, ...}, ...}
  std::map<std::string, int> lines;  // "model.d_model" -> line number (1-based)
  std::string path;
};

TomlDoc parse_toml(const std::string& text, const std::string& path);
TomlDoc read_toml_file(const std::string& path);  // error naming the file if unreadable
// One value as it would appear after "key = " (used for --section.key VALUE overrides).
// Text that is not a valid TOML value is taken as a bare string.
ojson parse_toml_value_or_string(const std::string& text);
// Writes root back as TOML: top-level scalars first, then one [table] per object.
std::string write_toml(const ojson& root);

}  // namespace qkv::app
