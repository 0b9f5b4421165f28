// BLEU against NLTK's corpus_bleu, and the 13a tokenizer against Python's re engine, through
// /usr/bin/python3 (python3-nltk) running tests/data/reference_bleu.py.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "data/metrics.hpp"
#include "data/parallel.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {
void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream f(path, std::ios::binary);
  for (const auto& l : lines) f << l << '\n';
}
std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  return w;
}
std::string join(const std::vector<std::string>& w) {
  std::string s;
  for (const auto& t : w) s += (s.empty() ? "" : " ") + t;
  return s;
}
}  // namespace

TEST_CASE("BLEU equals NLTK corpus_bleu on pre-tokenized Multi30k text, 13a equals Python re") {
  testing::TempDir dir("metrics_reference");
  const std::string m30k = testing::source_path("configs/data/multi30k");
  const std::vector<std::string> en = read_lines(split_file(m30k, "test_2016_flickr", "en"));
  const std::vector<std::string> de = read_lines(split_file(m30k, "test_2016_flickr", "de"));
  // Hypotheses: the references, deterministically damaged (a word dropped, two swapped, one
  // replaced), so precisions of every order and the brevity penalty are exercised.
  std::vector<std::string> refs, hyps;
  for (size_t i = 0; i < en.size(); ++i) {
    std::vector<std::string> r = words(tokenize_13a(en[i])), h = r;
    if (i % 3 == 0 && h.size() > 2) h.erase(h.begin() + static_cast<std::ptrdiff_t>(i % h.size()));
    if (i % 4 == 1 && h.size() > 3) std::swap(h[1], h[h.size() - 2]);
    if (i % 5 == 2 && !h.empty()) h[i % h.size()] = "xyzzy";
    refs.push_back(join(r));
    hyps.push_back(join(h));
  }
  write_lines(dir.file("hyp.txt"), hyps);
  write_lines(dir.file("ref.txt"), refs);
  std::vector<std::string> lines = en;
  lines.insert(lines.end(), de.begin(), de.end());
  for (const char* s : {"e.g. 1990-2000, 3.14 & 1,000.", "&amp;lt;x&gt; (a) [b] {c} ~d^ _e_ `f`",
                        "x.,y ,.z 9.a a.9 9,a a,9 9-9 a-9 -9", "\"quoted\" 'single' $5 50% #1 @me"})
    lines.push_back(s);
  write_lines(dir.file("lines.txt"), lines);

  const std::string script = testing::source_path("tests/data/reference_bleu.py");
  const std::string cmd = "/usr/bin/python3 '" + script + "' '" + dir.path.string() + "' > '" +
                          dir.file("python.log") + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream log;
  log << std::ifstream(dir.file("python.log")).rdbuf();
  INFO("command: " << cmd << "\nexit status " << rc << "\noutput:\n" << log.str());
  if (rc != 0)
    FAIL("the NLTK reference failed; /usr/bin/python3 needs python3-nltk (make install)");

  double nltk = 0;
  std::ifstream(dir.file("nltk.txt")) >> nltk;
  const BleuScore ours = corpus_bleu_tokenized(hyps, refs);
  std::printf("BLEU qkv %.12f  NLTK %.12f  (BP %.6f, %lld hypothesis tokens)\n", ours.score, nltk,
              ours.bp, static_cast<long long>(ours.hyp_len));
  CHECK(ours.bp < 1.0);
  CHECK(ours.correct[3] > 0);
  CHECK(ours.score == Approx(nltk).epsilon(1e-12));

  const std::vector<std::string> theirs = read_lines(dir.file("13a.txt"));
  REQUIRE(theirs.size() == lines.size());
  size_t differ = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (tokenize_13a(lines[i]) != theirs[i]) {
      if (++differ <= 5)
        UNSCOPED_INFO("line " << i << ": '" << lines[i] << "' -> ours '" << tokenize_13a(lines[i])
                              << "', re '" << theirs[i] << "'");
    }
  CHECK(differ == 0);
}
