// The served run folders and their files (see run_files.hpp).
#include "serve/run_files.hpp"

#include <cstdio>
#include <fstream>
#include <map>

#include "core/bounded_json.hpp"
#include "core/error.hpp"
#include "runfolder/run_file.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace qkv::serve {

namespace {

// A metrics record: within a request's read (8 MiB), at most kMaxJsonDepth levels deep.
const JsonBounds kRecordBounds{kMaxJsonDepth, uint64_t{8} << 20};

std::string valid_utf8_name(const std::string& name) {
  return json::parse(json(name).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

}  // namespace

std::vector<ServedRun> served_runs(const std::vector<std::string>& dirs) {
  std::vector<ServedRun> runs;
  std::map<std::string, int> seen;
  for (const std::string& d : dirs) {
    std::error_code ec;
    const fs::path dir = fs::canonical(d, ec);
    QKV_CHECK(!ec && fs::is_directory(dir), "serve", d, ": no such run folder");
    ServedRun r;
    r.dir = dir;
    r.saturation = !fs::exists(dir / "config.toml") && fs::exists(dir / "saturation.json");
    QKV_CHECK(r.saturation || fs::exists(dir / "config.toml"), "serve", d,
              ": not a run folder (no config.toml) nor a qkv saturation folder (no "
              "saturation.json)");
    // A name that is not UTF-8 is served with U+FFFD in place of its bad bytes (JSON has no
    // other way to say it), and looked up by that name.
    const std::string base = valid_utf8_name(dir.filename().string());
    const int n = ++seen[base];
    r.name = n == 1 ? base : base + "-" + std::to_string(n);
    runs.push_back(std::move(r));
  }
  return runs;
}

std::optional<fs::path> file_inside(const ServedRun& run, const std::string& relative) {
  // A NUL would end the path early at the system call: "a.svg%00.png" is not a.svg.
  if (relative.empty() || relative.size() > 512 || relative.find('\0') != std::string::npos)
    return std::nullopt;
  const fs::path rel(relative);
  if (rel.is_absolute() || rel.has_root_name()) return std::nullopt;
  for (const fs::path& part : rel)
    if (part == ".." || part == ".") return std::nullopt;
  std::error_code ec;
  const fs::path full = fs::canonical(run.dir / rel, ec);  // follows every link
  if (ec || !fs::is_regular_file(full, ec)) return std::nullopt;
  // Still inside the folder once links are resolved: the canonical path starts with it.
  auto d = run.dir.begin();
  auto f = full.begin();
  for (; d != run.dir.end(); ++d, ++f)
    if (f == full.end() || *d != *f) return std::nullopt;
  return full;
}

json read_metrics(const ServedRun& run, int64_t offset, int64_t since_step, int64_t max_bytes) {
  json out{{"records", json::array()}, {"next", offset}};
  const fs::path path = run.dir / "metrics.jsonl";
  if (!fs::exists(fs::symlink_status(path))) return out;
  // A FIFO or a device here is refused (a qkv::Error), never waited on; at most max_bytes of
  // what the log had grown to when opened are read.
  const run::RunFile log(path.string(), "metrics log");
  const int64_t size = static_cast<int64_t>(log.size());
  if (offset < 0 || offset > size) {  // the file was replaced: start again
    offset = 0;
    out["reset"] = true;
  }
  std::string chunk = log.read(static_cast<uint64_t>(offset),
                               static_cast<uint64_t>(std::max<int64_t>(max_bytes, 0)));
  const size_t end = chunk.rfind('\n');
  if (end == std::string::npos) {
    out["next"] = offset;
    return out;
  }
  int64_t skipped = 0;
  for (size_t at = 0; at <= end;) {
    const size_t nl = chunk.find('\n', at);
    std::string why;
    std::optional<json> rec =
        try_parse_json(std::string_view(chunk).substr(at, nl - at), why, kRecordBounds);
    if (rec && !rec->is_object()) why = "not a JSON object";
    if (!why.empty()) {
      // One line per damaged record, the rest of the log still served.
      if (nl > at) {
        std::fprintf(stderr, "qkv serve: %s: the record at byte %lld is skipped: %s\n",
                     path.string().c_str(), static_cast<long long>(offset + at), why.c_str());
        ++skipped;
      }
    } else if (!rec->contains("step") || !(*rec)["step"].is_number() ||
               (*rec)["step"].get<double>() > static_cast<double>(since_step)) {
      out["records"].push_back(std::move(*rec));
    }
    at = nl + 1;
  }
  if (skipped > 0) out["skipped"] = skipped;
  out["next"] = offset + static_cast<int64_t>(end + 1);
  return out;
}

}  // namespace qkv::serve
