#include <catch2/catch.hpp>

#include "data/config.hpp"
#include "data/parallel.hpp"
#include "data/sentencepiece.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {
// The first n English and German training captions of Multi30k.
std::vector<std::string> captions(size_t n) {
  const std::string dir = testing::source_path("configs/data/multi30k");
  std::vector<std::string> out;
  for (const char* lang : {"en", "de"}) {
    std::vector<std::string> l = read_lines(split_file(dir, "train", lang));
    out.insert(out.end(), l.begin(), l.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return out;
}
}  // namespace

TEST_CASE("sentencepiece: deterministic training, qkv's specials, and the round trip") {
  const std::vector<std::string> text = captions(1500);
  for (const SpmType type : {SpmType::unigram, SpmType::bpe}) {
    SentencePieceOptions o;
    o.vocab_size = 400;
    o.type = type;
    const SentencePiece a = SentencePiece::train(text, o);
    const SentencePiece b = SentencePiece::train(text, o);
    CHECK(a.serialized() == b.serialized());  // the same .model bytes, twice
    const Vocab v = a.vocab();
    CHECK(v.size() == 400);
    CHECK(v.token(0) == kPad);
    CHECK(v.token(1) == kBos);
    CHECK(v.token(2) == kEos);
    CHECK(v.token(3) == kUnk);
    for (const std::string s : {"Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
                                "A little girl climbing into a wooden playhouse.",
                                "Zwei Hunde spielen im Schnee, ßüöä!"}) {
      const std::vector<std::string> pieces = a.encode(s);
      CHECK(pieces.size() > 1);
      CHECK(a.decode(pieces) == s);  // detokenized: plain text again
      // Pieces are vocabulary tokens: ids round-trip too (no <unk> for seen characters).
      CHECK(v.decode(v.encode(pieces)) == pieces);
    }
    // A character never seen in training is one piece that the vocabulary maps to <unk>.
    const std::vector<std::string> odd = a.encode("Ein \u2603.");
    CHECK(v.encode(odd) == std::vector<int64_t>{v.id("▁Ein"), v.id("▁"), 3, v.id(".")});
    const SentencePiece c = SentencePiece::from_serialized(a.serialized(), "copy");
    CHECK(c.encode("Ein Hund.") == a.encode("Ein Hund."));
  }
}

TEST_CASE("sentencepiece: bad options and files are one clear error") {
  SentencePieceOptions o;
  o.vocab_size = 100000;  // far more pieces than 20 sentences allow
  CHECK_THROWS_WITH(SentencePiece::train(captions(10), o),
                    Catch::Contains("sentencepiece") && Catch::Contains("spm_vocab_size"));
  const std::string junk = testing::write_file("junk.model", "not a model");
  CHECK_THROWS_WITH(SentencePiece::load(junk), Catch::Contains(junk));
  CHECK_THROWS_WITH(SentencePiece::load(testing::scratch("absent.model")),
                    Catch::Contains("cannot read the SentencePiece model"));
}

TEST_CASE("sentencepiece: a parallel run's models are saved, reloaded, and decode to text") {
  DataConfig c;
  c.task = qkv::data::TaskKind::parallel;
  c.path = testing::source_path("configs/data/multi30k");
  c.src_lang = "de";
  c.tgt_lang = "en";
  c.valid_split = "val";
  c.test_split = "test_2016_flickr";
  c.train_size = 800;
  c.valid_size = 20;
  c.test_size = 20;
  c.tokenizer = qkv::data::TokenizerKind::sentencepiece;
  c.spm_vocab_size = 300;
  for (bool shared : {true, false}) {
    c.shared_vocab = shared;
    const DataSplits d = load_data(c);
    const auto files = sentencepiece_files(d);
    REQUIRE(files.size() == (shared ? 1u : 2u));
    CHECK(files[0].first == (shared ? "spm.model" : "spm.src.model"));
    CHECK((d.src_vocab == d.tgt_vocab) == shared);
    // The target side decodes back to its text.
    const Example& e = d.test.examples[0];
    CHECK(decode_target(d, e.tgt) == d.test.text[0].tgt);
    CHECK(encode_source_text(d, d.test.text[0].src) == e.src);
    // A run folder with the models: load_data reads them instead of training.
    const std::string dir = testing::scratch(shared ? "spm-shared" : "spm-split");
    std::filesystem::create_directories(dir);
    for (const auto& [name, bytes] : files)
      std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    DataConfig again = c;
    again.spm_dir = dir;
    again.spm_vocab_size = 999;  // ignored: the saved models win
    const DataSplits r = load_data(again);
    CHECK(r.src_vocab == d.src_vocab);
    CHECK(r.tgt_vocab == d.tgt_vocab);
  }
}
