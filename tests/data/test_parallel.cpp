#include <catch2/catch.hpp>

#include <zlib.h>

#include "data/config.hpp"
#include "data/parallel.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {
// A gzip file holding text, written with zlib.
std::string write_gz(const std::string& name, const std::string& text) {
  const std::string p = testing::scratch(name);
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) ==
          static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
  return p;
}
std::string read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
}  // namespace

TEST_CASE("parallel: plain and gzip files read alike, CRLF, BOM and the last newline") {
  const std::string text = "\xEF\xBB\xBFZwei Männer.\r\nEin Hund läuft.\nKein Zeilenende";
  const std::string plain = testing::write_file("p.de", text);
  const std::string gz = write_gz("p.de.gz", text);
  const std::vector<std::string> want = {"Zwei Männer.", "Ein Hund läuft.", "Kein Zeilenende"};
  CHECK(read_lines(plain) == want);
  CHECK(read_lines(gz) == want);
  CHECK(read_lines(testing::write_file("nl.de", "a\nb\n")) == std::vector<std::string>{"a", "b"});
  CHECK(read_lines(testing::write_file("empty.de", "")).empty());
}

TEST_CASE("parallel: pairs, lowercasing, a limit, and empty lines") {
  const std::string de = write_gz("c.de.gz", "Ein Mann.\nZwei Frauen.\nDrei Kinder.\n");
  const std::string en = testing::write_file("c.en", "A man.\nTwo women.\nThree children.\n");
  ParallelCorpus c = read_parallel(de, en);
  REQUIRE(c.pairs.size() == 3);
  CHECK(c.pairs[1].src == "Zwei Frauen.");
  CHECK(c.pairs[1].tgt == "Two women.");
  ParallelOptions o;
  o.lowercase = true;
  o.limit = 2;
  c = read_parallel(de, en, o);
  REQUIRE(c.pairs.size() == 2);
  CHECK(c.pairs[0].src == "ein mann.");
  const std::string hole = testing::write_file("h.en", "A man.\n  \nThree children.\n");
  CHECK_THROWS_WITH(read_parallel(de, hole),
                    Catch::Contains(hole + ":2: empty line") && Catch::Contains("skip_malformed"));
  o = ParallelOptions{};
  o.skip_empty = true;
  c = read_parallel(de, hole, o);
  CHECK(c.pairs.size() == 2);
  CHECK(c.skipped == 1);
  CHECK(c.pairs[1].tgt == "Three children.");
}

TEST_CASE("parallel: each bad input is one error naming the file") {
  const std::string de = testing::write_file("m.de", "eins\nzwei\ndrei\n");
  const std::string en = testing::write_file("m.en", "one\ntwo\n");
  CHECK_THROWS_WITH(read_parallel(de, en), Catch::Contains("line counts differ") &&
                                               Catch::Contains(de + " has 3 lines") &&
                                               Catch::Contains(en + " has 2"));
  const std::string missing = testing::scratch("nowhere.en");
  CHECK_THROWS_WITH(read_lines(missing), Catch::Contains(missing + ": no such file"));
  const std::string bad = testing::write_file("bad.de",
                                              "gut\nschl\xFF"
                                              "cht\n");
  CHECK_THROWS_WITH(read_lines(bad), Catch::Contains(bad + ":2: invalid UTF-8 at byte 5"));
  const std::string bad_gz = write_gz("bad.de.gz", "gut\n\xC3\x28\n");
  CHECK_THROWS_WITH(read_lines(bad_gz), Catch::Contains(bad_gz + ":2: invalid UTF-8"));

  // A .gz cut short: every prefix that loses the stream's end is an error, never a short read.
  std::string long_text;
  for (int i = 0; i < 2000; ++i) long_text += "Ein Mann mit einem Hut " + std::to_string(i) + "\n";
  const std::string whole = read_bytes(write_gz("whole.gz", long_text));
  for (size_t keep : {whole.size() / 2, whole.size() - 4, size_t{30}}) {
    const std::string cut = testing::write_file("cut.gz", whole.substr(0, keep));
    CHECK_THROWS_WITH(read_lines(cut), Catch::Contains(cut) && Catch::Contains("truncated"));
  }
  std::string corrupt = whole;
  corrupt[corrupt.size() / 2] ^= 0x55;
  const std::string cp = testing::write_file("corrupt.gz", corrupt);
  CHECK_THROWS_WITH(read_lines(cp), Catch::Contains(cp) && Catch::Contains("gzip"));
}

TEST_CASE("parallel: the shipped Multi30k files have the documented sizes") {
  const std::string dir = testing::source_path("configs/data/multi30k");
  const std::vector<std::pair<std::string, size_t>> splits = {
      {"train", 29000}, {"val", 1014}, {"test_2016_flickr", 1000}, {"test_2017_flickr", 1000}};
  for (const auto& [split, n] : splits) {
    const ParallelCorpus c =
        read_parallel(split_file(dir, split, "de"), split_file(dir, split, "en"));
    CHECK(c.pairs.size() == n);
  }
  CHECK(split_file(dir, "val", "de") == dir + "/val.de.gz");
}

TEST_CASE("parallel: data.task = parallel keeps each split whole and names missing keys") {
  DataConfig c;
  c.task = qkv::data::TaskKind::parallel;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.path"));
  c.path = testing::source_path("configs/data/multi30k");
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.src_lang"));
  c.src_lang = "de";
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.tgt_lang"));
  c.tgt_lang = "en";
  c.valid_split = "val";
  c.test_split = "test_2016_flickr";
  c.tokenizer = qkv::data::TokenizerKind::words;
  c.train_size = 500;
  c.valid_size = 0;
  c.test_size = 0;
  c.max_seq_len = 8;  // filters training pairs only
  const DataSplits d = load_data(c);
  CHECK(d.train.size() < 500);
  CHECK(d.train.size() + d.dropped == 500);
  CHECK(d.valid.size() == 1014);
  CHECK(d.test.size() == 1000);
  CHECK(d.test.text[0].tgt == "A man in an orange hat starring at something.");
  const Dataset t17 = load_parallel_split(c, d, "test_2017_flickr");
  CHECK(t17.size() == 1000);
  CHECK_THROWS_WITH(load_parallel_split(c, d, "test_2099"), Catch::Contains("test_2099.de"));
}
