#include <catch2/catch.hpp>

#include <set>
#include <sstream>

#include "data/corpus.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

TEST_CASE("tsv: Anki / Tatoeba lines, extra columns, CRLF, BOM and blank lines") {
  const std::string text =
      "\xEF\xBB\xBFGo.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\r\n"
      "Hi.\tSalut !\n"
      "\n"
      "Run!\tCours\xC2\xA0!\n"
      "ÉTÉ\tSommer\n";
  const std::string path = testing::write_file("ok.tsv", text);
  const TsvCorpus c = read_tsv(path);
  REQUIRE(c.pairs.size() == 4);
  CHECK(c.pairs[0].src == "Go.");
  CHECK(c.pairs[0].tgt == "Va !");
  CHECK(c.pairs[1].tgt == "Salut !");
  CHECK(c.pairs[2].tgt == "Cours\xC2\xA0!");
  CHECK(c.pairs[3].src == "ÉTÉ");
  TsvOptions lower;
  lower.lowercase = true;
  const TsvCorpus l = read_tsv(path, lower);
  CHECK(l.pairs[0].src == "go.");
  CHECK(l.pairs[3].src == "été");
  CHECK(l.pairs[3].tgt == "sommer");
}

TEST_CASE("tsv: malformed lines are errors naming file and line, or skipped and counted") {
  struct Case {
    std::string line, reason;
  };
  const std::vector<Case> cases = {{"no tab here", "no tab"},
                                   {"\tcible", "empty source"},
                                   {"source\t   ", "empty target"},
                                   {"bad \xC3\x28 utf8\tok", "invalid UTF-8"}};
  for (const Case& k : cases) {
    const std::string text = "a\tb\nc\td\n\n" + k.line + "\ne\tf\n";  // the bad line is line 4
    const std::string path = testing::write_file("bad.tsv", text);
    CHECK_THROWS_WITH(read_tsv(path), Catch::Contains(path + ":4:") && Catch::Contains(k.reason));
    TsvOptions skip;
    skip.skip_malformed = true;
    const TsvCorpus c = read_tsv(path, skip);
    CHECK(c.pairs.size() == 3);
    CHECK(c.skipped == 1);
    REQUIRE(c.problems.size() == 1);
    CHECK(c.problems[0].find(":4: " + k.reason) != std::string::npos);
    CHECK(c.pairs[2].src == "e");
  }
  CHECK_THROWS_WITH(read_tsv(testing::scratch("nope.tsv")), Catch::Contains("cannot open"));
}

TEST_CASE("tsv: write then read round-trips, tabs inside a side are refused") {
  const std::vector<TextPair> pairs = {{"3rd of March 2021", "2021-03-03"}, {"日本", "Japan"}};
  const std::string path = testing::scratch("rt.tsv");
  write_tsv(path, pairs);
  const TsvCorpus c = read_tsv(path);
  REQUIRE(c.pairs.size() == 2);
  CHECK(c.pairs[1].src == "日本");
  CHECK(c.pairs[1].tgt == "Japan");
  CHECK_THROWS_AS(write_tsv(path, {{"a\tb", "c"}}), Error);
}

TEST_CASE("split: seeded, disjoint, covering, sized") {
  const SplitIndices s = split_indices(1000, 0, 100, 50, 9);
  CHECK(s.train.size() == 850);
  CHECK(s.valid.size() == 100);
  CHECK(s.test.size() == 50);
  std::set<int64_t> all;
  for (auto* v : {&s.train, &s.valid, &s.test}) all.insert(v->begin(), v->end());
  CHECK(all.size() == 1000);
  const SplitIndices again = split_indices(1000, 0, 100, 50, 9);
  CHECK(again.test == s.test);
  const SplitIndices other = split_indices(1000, 0, 100, 50, 10);
  CHECK(other.test != s.test);
  CHECK(split_indices(1000, 200, 100, 50, 9).train.size() == 200);
  CHECK_THROWS_AS(split_indices(10, 0, 5, 5, 0), Error);
  CHECK_THROWS_AS(split_indices(10, 5, 3, 3, 0), Error);
}
