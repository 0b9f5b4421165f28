// The served run folders and their files (see run_files.hpp).
#include "serve/run_files.hpp"

#include <fstream>
#include <map>

#include "core/error.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace qkv::serve {

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
    const std::string base = dir.filename().string();
    const int n = ++seen[base];
    r.name = n == 1 ? base : base + "-" + std::to_string(n);
    runs.push_back(std::move(r));
  }
  return runs;
}

std::optional<fs::path> file_inside(const ServedRun& run, const std::string& relative) {
  if (relative.empty() || relative.size() > 512) return std::nullopt;
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
  std::ifstream in(run.dir / "metrics.jsonl", std::ios::binary);
  if (!in) return out;
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (offset < 0 || offset > size) {  // the file was replaced: start again
    offset = 0;
    out["reset"] = true;
  }
  in.seekg(offset);
  std::string chunk(static_cast<size_t>(std::min<int64_t>(size - offset, max_bytes)), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  const size_t end = chunk.rfind('\n');
  if (end == std::string::npos) {
    out["next"] = offset;
    return out;
  }
  size_t at = 0;
  while (at <= end) {
    const size_t nl = chunk.find('\n', at);
    const json rec = json::parse(chunk.begin() + at, chunk.begin() + nl, nullptr, false);
    if (rec.is_object() && (!rec.contains("step") || !rec["step"].is_number() ||
                            rec["step"].get<double>() > static_cast<double>(since_step)))
      out["records"].push_back(rec);
    at = nl + 1;
  }
  out["next"] = offset + static_cast<int64_t>(end + 1);
  return out;
}

}  // namespace qkv::serve
