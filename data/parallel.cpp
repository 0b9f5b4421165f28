#include "data/parallel.hpp"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "data/utf8.hpp"

namespace qkv::data {

namespace {

// The whole file, decompressed when it is gzip. gzread reads a plain file as it is, so one
// code path serves both; a truncated or corrupt stream is an error, not a short read.
std::string read_all(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  QKV_CHECK(fs::exists(path, ec), "read_lines", path, ": no such file");
  QKV_CHECK(!fs::is_directory(path, ec), "read_lines", path, ": is a folder, not a file");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  QKV_CHECK(f != nullptr, "read_lines", path, ": cannot open");
  gzbuffer(f.get(), 1 << 17);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f.get(), buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    int code = Z_OK;
    const char* msg = gzerror(f.get(), &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END))
      throw Error(cat("read_lines: ", path, ": ",
                      code == Z_BUF_ERROR ? "truncated gzip file (unexpected end of file)"
                                          : cat("corrupt gzip data (", msg, ")")));
    if (n == 0) break;
  }
  return out;
}

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || (c >= 9 && c <= 13); });
}

}  // namespace

std::vector<std::string> read_lines(const std::string& path) {
  const std::string text = read_all(path);
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lines.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    size_t bad = 0;
    QKV_CHECK(valid_utf8(line, &bad), "read_lines", path, ":", lines.size() + 1,
              ": invalid UTF-8 at byte ", bad + 1);
    lines.push_back(std::move(line));
    at = end + 1;
  }
  return lines;
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                             const ParallelOptions& o) {
  std::vector<std::string> src = read_lines(src_path), tgt = read_lines(tgt_path);
  QKV_CHECK(src.size() == tgt.size(), "read_parallel", "line counts differ: ", src_path, " has ",
            src.size(), " lines, ", tgt_path, " has ", tgt.size());
  ParallelCorpus out;
  for (size_t i = 0; i < src.size(); ++i) {
    if (o.limit > 0 && static_cast<int64_t>(out.pairs.size()) >= o.limit) break;
    if (blank(src[i]) || blank(tgt[i])) {
      const std::string& file = blank(src[i]) ? src_path : tgt_path;
      QKV_CHECK(o.skip_empty, "read_parallel", file, ":", i + 1,
                ": empty line (set data.skip_malformed to drop such pairs)");
      ++out.skipped;
      continue;
    }
    TextPair p{std::move(src[i]), std::move(tgt[i])};
    if (o.lowercase) p.src = to_lower_utf8(p.src), p.tgt = to_lower_utf8(p.tgt);
    out.pairs.push_back(std::move(p));
  }
  return out;
}

std::string split_file(const std::string& dir, const std::string& split, const std::string& lang) {
  const std::filesystem::path base = std::filesystem::path(dir) / (split + "." + lang);
  const std::filesystem::path gz = base.string() + ".gz";
  return std::filesystem::exists(gz) ? gz.string() : base.string();
}

}  // namespace qkv::data
