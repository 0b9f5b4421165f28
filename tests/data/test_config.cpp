#include <catch2/catch.hpp>

#include <set>

#include "data/config.hpp"
#include "data/loader.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

TEST_CASE("config: synthetic tasks load with their vocabulary and sizes") {
  DataConfig c;
  c.task = qkv::data::TaskKind::reverse;
  c.vocab_size = 8;
  c.train_size = 200, c.valid_size = 20, c.test_size = 30;
  const DataSplits d = load_data(c);
  CHECK(d.train.size() == 200);
  CHECK(d.valid.size() == 20);
  CHECK(d.test.size() == 30);
  CHECK(d.train.name == "reverse/train");
  CHECK(d.src_vocab.size() == 12);
  CHECK(d.framing.bos == 1);
  CHECK(d.framing.eos == 2);
  CHECK(d.train.examples[0].src != d.test.examples[0].src);  // splits draw different streams
  c.task = qkv::data::TaskKind::annotated_copy;
  const DataSplits a = load_data(c);
  CHECK(a.src_vocab.size() == 11);
  CHECK(a.framing.eos == -1);
  CHECK(a.train.examples[0].src.size() == 10);
}

TEST_CASE("config: the dates task in memory keeps test dates out of train, decodes back") {
  DataConfig c;
  c.task = qkv::data::TaskKind::dates;
  c.train_size = 1000, c.valid_size = 100, c.test_size = 100;
  c.tokenizer = qkv::data::TokenizerKind::chars;
  const DataSplits d = load_data(c);
  REQUIRE(d.test.text.size() == 100);
  std::set<std::string> train_iso;
  for (const auto& p : d.train.text) train_iso.insert(p.tgt);
  for (const auto& p : d.test.text) CHECK(train_iso.count(p.tgt) == 0);
  // every ISO character is in the (train-built) vocabulary, so targets decode exactly
  for (size_t i = 0; i < 100; ++i)
    CHECK(decode(d.test.examples[i].tgt, d.tgt_vocab) == d.test.text[i].tgt);
}

TEST_CASE("config: tsv with a word tokenizer, separate vocabularies, max_seq_len, skipping") {
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += "the cat number " + std::to_string(i % 7) + " sat.\tle chat numéro " +
            std::to_string(i % 7) + " était assis.\n";
  text += "broken line without tab\n";
  text += "a very long sentence that goes on and on and on and on\tcourt\n";
  const std::string path = testing::write_file("cfg.tsv", text);
  DataConfig c;
  c.task = qkv::data::TaskKind::tsv;
  c.path = path;
  c.tokenizer = qkv::data::TokenizerKind::words;
  c.shared_vocab = false;
  c.train_size = 0, c.valid_size = 5, c.test_size = 5;
  CHECK_THROWS_WITH(load_data(c), Catch::Contains(":61:"));
  c.skip_malformed = true;
  c.max_seq_len = 12;
  const DataSplits d = load_data(c);
  CHECK(d.skipped == 1);
  CHECK(d.dropped == 1);
  CHECK(d.train.size() + d.valid.size() + d.test.size() == 60);
  CHECK(d.src_vocab.contains("cat"));
  CHECK_FALSE(d.src_vocab.contains("chat"));
  CHECK(d.tgt_vocab.contains("était"));
  CHECK(d.tokenizer == TokenizerKind::words);
  for (size_t i = 0; i < d.valid.text.size(); ++i)
    CHECK(decode(d.valid.examples[i].src, d.src_vocab) == d.valid.text[i].src);
}

TEST_CASE("config: bad values are errors naming the key") {
  DataConfig c;
  CHECK_THROWS_WITH(qkv::parse_name<TaskKind>("translate", "data.task"),
                    Catch::Contains("data.task") && Catch::Contains("parallel"));
  c.batch_size = 0;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.batch_size"));
  c = DataConfig{};
  c.task = qkv::data::TaskKind::tsv;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.path"));
  c = DataConfig{};
  c.max_len = 0;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.max_len"));
  CHECK_THROWS_WITH(qkv::parse_name<TokenizerKind>("bpe", "data.tokenizer"),
                    Catch::Contains("bpe"));
  const LoaderOptions o = loader_options(DataConfig{});
  CHECK(o.batch.batch_size == 64);
  CHECK(o.prefetch == 2);
}
