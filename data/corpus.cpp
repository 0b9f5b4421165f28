#include "data/corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/random.hpp"
#include "data/text_file.hpp"
#include "data/utf8.hpp"

namespace qkv::data {

namespace {
bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || (c >= 9 && c <= 13); });
}
}  // namespace

TsvCorpus parse_tsv(std::istream& in, const std::string& name, const TsvOptions& o) {
  TsvCorpus out;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (blank(line)) continue;
    std::string problem;
    size_t bad = 0;
    const size_t tab = line.find('\t');
    if (!valid_utf8(line, &bad)) {
      problem = cat("invalid UTF-8 at byte ", bad + 1);
    } else if (tab == std::string::npos) {
      problem = "no tab between source and target";
    } else {
      const size_t tab2 = line.find('\t', tab + 1);
      TextPair p{
          line.substr(0, tab),
          line.substr(tab + 1, tab2 == std::string::npos ? std::string::npos : tab2 - tab - 1)};
      if (blank(p.src))
        problem = "empty source";
      else if (blank(p.tgt))
        problem = "empty target";
      if (problem.empty()) {
        if (o.lowercase) p.src = to_lower_utf8(p.src), p.tgt = to_lower_utf8(p.tgt);
        out.pairs.push_back(std::move(p));
        continue;
      }
    }
    const std::string where = cat(name, ":", lineno, ": ", problem);
    if (!o.skip_malformed)
      throw Error(cat("read_tsv: ", where, " (set skip_malformed to skip such lines)"));
    ++out.skipped;
    if (out.problems.size() < 10) out.problems.push_back(where);
  }
  QKV_CHECK(!in.bad(), "read_tsv", name, ": read error after line ", lineno);
  return out;
}

TsvCorpus read_tsv(const std::string& path, const TsvOptions& o) {
  std::error_code ec;
  QKV_CHECK(std::filesystem::exists(path, ec), "read_tsv", "cannot open ", path, " (no such file)");
  // Read whole and bounded (a device, an endless line or a FIFO nobody writes is an error, not a
  // hang), then split: a pair per line.
  std::istringstream in(read_text_file(path, corpus_rules(kMaxCorpusLine)));
  return parse_tsv(in, path, o);
}

void write_tsv(const std::string& path, const std::vector<TextPair>& pairs) {
  std::ofstream f(path, std::ios::binary);
  QKV_CHECK(f.good(), "write_tsv", "cannot open ", path, " for writing");
  for (size_t i = 0; i < pairs.size(); ++i) {
    for (const std::string* s : {&pairs[i].src, &pairs[i].tgt})
      QKV_CHECK(s->find_first_of("\t\r\n") == std::string::npos, "write_tsv", "pair ", i,
                " holds a tab or newline: '", *s, "'");
    f << pairs[i].src << '\t' << pairs[i].tgt << '\n';
  }
  f.flush();
  QKV_CHECK(f.good(), "write_tsv", "write to ", path, " failed");
}

SplitIndices split_indices(int64_t n, int64_t train_size, int64_t valid_size, int64_t test_size,
                           uint64_t seed) {
  QKV_CHECK(train_size >= 0 && valid_size >= 0 && test_size >= 0, "split_indices",
            "negative split size: train ", train_size, ", valid ", valid_size, ", test ",
            test_size);
  QKV_CHECK(valid_size + test_size < n, "split_indices",
            "valid_size + test_size = ", valid_size + test_size,
            " leaves no training examples out of ", n);
  QKV_CHECK(valid_size + test_size + train_size <= n, "split_indices", "asked for ", train_size,
            " + ", valid_size, " + ", test_size, " examples, only ", n, " available");
  Generator g(seed);
  const std::vector<int64_t> perm = randperm(n, g);
  SplitIndices s;
  const auto b = perm.begin();
  s.test.assign(b, b + test_size);
  s.valid.assign(b + test_size, b + test_size + valid_size);
  s.train.assign(b + test_size + valid_size,
                 train_size == 0 ? perm.end() : b + test_size + valid_size + train_size);
  for (auto* v : {&s.train, &s.valid, &s.test}) std::sort(v->begin(), v->end());
  return s;
}

}  // namespace qkv::data
