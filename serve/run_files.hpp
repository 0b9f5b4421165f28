// The run folders `qkv serve` was started with, and reading them while a training writes them.
// Only these folders are ever read: a name the server was not given, a path with `..`, or one
// that leaves the folder through a symbolic link is not found (the server's 404).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qkv::serve {

struct ServedRun {
  std::string name;           // the folder's name, made unique with -2, -3... when repeated
  std::filesystem::path dir;  // canonical
  bool saturation = false;    // a `qkv saturation --out` folder (saturation.json, no config)
};

// Each folder must exist and be a run folder (config.toml) or a saturation folder; qkv::Error
// naming the folder otherwise.
std::vector<ServedRun> served_runs(const std::vector<std::string>& dirs);

// The file at `relative` inside run.dir when it is a regular file that stays inside it after
// resolving symbolic links; nullopt for anything else (absent, `..`, absolute, a link out).
std::optional<std::filesystem::path> file_inside(const ServedRun& run, const std::string& relative);

// metrics.jsonl from byte `offset` on, complete lines only (a training appends; a line not yet
// ended by '\n' is left for the next read): {"records":[...], "next": offset after the last
// complete line}. Records with a step <= since_step are skipped. A missing file: no records.
// A line that is not a JSON object, or nests deeper than kMaxJsonDepth (core/bounded_json.hpp),
// is skipped with one line on stderr, and counted in "skipped" (absent when 0): a damaged log
// must not stop the page, nor the server.
nlohmann::json read_metrics(const ServedRun& run, int64_t offset, int64_t since_step,
                            int64_t max_bytes = 8 << 20);

}  // namespace qkv::serve
