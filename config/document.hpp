// A config file as qkv reads it: TOML 1.0, parsed by toml++, as JSON (a TOML table maps onto a
// JSON object) with the line each key was set on, for errors that name it.
//
// Every TOML spelling of a key is the same key: `[model]\nd_model = 64`, `model.d_model = 64`
// and `model = { d_model = 64 }` give the same document. Invalid TOML is one error
// "FILE:LINE:COLUMN: what is wrong" (toml++'s description). Dates and times are valid TOML
// that no qkv key takes: an error naming the key.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::config {

using ojson = nlohmann::ordered_json;

struct ConfigDoc {
  ojson root = ojson::object();      // {"seed": 1, "model": {"d_model": 128, ...}, ...}
  std::map<std::string, int> lines;  // "model.d_model" -> line number (1-based); "model" too
  std::string path;
};

// Config files are regular files of at most this many bytes, counted as they are read.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

ConfigDoc parse_config(const std::string& text, const std::string& path);
// A FIFO, device or directory is refused before anything waits on it; errors name the file.
ConfigDoc read_config_file(const std::string& path);
// One value as it would appear after "key = " (the VALUE of --section.key VALUE). Text that is
// not one TOML value (`reverse`, `/data/corpus.tsv`) or is a date is taken as a bare string.
ojson parse_value_or_string(const std::string& text);
// root as TOML: top-level scalars first, then one [table] per object, keys in root's order,
// each value written by toml++. parse_config reads it back to the same root.
std::string write_config(const ojson& root);

}  // namespace qkv::config
