#include "data/parallel.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "data/text_file.hpp"
#include "data/utf8.hpp"

namespace qkv::data {

namespace {

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || (c >= 9 && c <= 13); });
}

}  // namespace

std::vector<std::string> read_lines(const std::string& path) {
  const std::string text = read_text_file(path, corpus_rules(kMaxCorpusLine));
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
