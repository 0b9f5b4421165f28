#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

#include "data/config.hpp"
#include "data/parallel.hpp"
#include "data/sentencepiece.hpp"
#include "data/subword_sampling.hpp"
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

// The first `train` pairs of Multi30k's training split and `eval` of val and test_2016_flickr,
// German to English, with a 300-piece SentencePiece model.
DataConfig multi30k_slice(int64_t train, int64_t eval) {
  DataConfig c;
  c.task = qkv::data::TaskKind::parallel;
  c.path = testing::source_path("configs/data/multi30k");
  c.src_lang = "de";
  c.tgt_lang = "en";
  c.valid_split = "val";
  c.test_split = "test_2016_flickr";
  c.train_size = train;
  c.valid_size = eval;
  c.test_size = eval;
  c.tokenizer = qkv::data::TokenizerKind::sentencepiece;
  c.spm_vocab_size = 300;
  return c;
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
  DataConfig c = multi30k_slice(800, 20);
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

TEST_CASE("sentencepiece: sampled segmentations spell the text and follow the seed") {
  const std::vector<std::string> text = captions(1500);
  const std::vector<std::string_view> some(text.begin(), text.begin() + 300);
  for (const SpmType type : {SpmType::unigram, SpmType::bpe}) {
    SentencePieceOptions o;
    o.vocab_size = 400;
    o.type = type;
    const SentencePiece m = SentencePiece::train(text, o);
    const auto a = m.sample(some, 0.1, 7);
    CHECK(m.sample(some, 0.1, 7) == a);  // the same seed, the same draws
    std::vector<std::vector<std::string>> elsewhere;
    std::thread([&] { elsewhere = m.sample(some, 0.1, 7); }).join();
    CHECK(elsewhere == a);  // from any thread
    CHECK(m.sample(some, 0.1, 8) != a);
    // Every draw is a segmentation of its text, and most are not the best one.
    int best_01 = 0, best_1 = 0;
    const auto sharp = m.sample(some, 1.0, 7);
    for (size_t i = 0; i < some.size(); ++i) {
      CHECK(m.decode(a[i]) == some[i]);
      const auto best = m.encode(some[i]);
      best_01 += a[i] == best;
      best_1 += sharp[i] == best;
    }
    CHECK(best_01 < 150);
    // unigram: alpha 1 samples p(x) itself, 0.1 flattens it toward uniform, so the best comes
    // up more often at 1; bpe: alpha is the merge dropout, so 1.0 keeps no merge at all.
    if (type == SpmType::unigram) CHECK(best_1 > best_01);
    if (type == SpmType::bpe) CHECK(best_1 == 0);
    CHECK_THROWS_WITH(m.sample(some, 0.0, 1), Catch::Contains("alpha"));
    CHECK_THROWS_WITH(m.sample(some, 1.5, 1), Catch::Contains("alpha"));
  }
}

TEST_CASE("subword sampling: each epoch draws a training set of its own, again on each call") {
  DataConfig c = multi30k_slice(600, 10);
  const DataSplits d = load_data(c);
  const SubwordSampler sampler(d, 0.2, 1);
  const auto e0 = sampler(0), e1 = sampler(1);
  CHECK(sampler(0)->examples.size() == e0->examples.size());
  size_t longest = 0, drawn_longest = 0;
  int differ = 0, same_again = 0, other_best = 0;
  const auto again = sampler(0);
  for (size_t i = 0; i < d.train.examples.size(); ++i) {
    const Example &best = d.train.examples[i], &x = e0->examples[i];
    longest = std::max({longest, best.src.size(), best.tgt.size()});
    drawn_longest = std::max({drawn_longest, x.src.size(), x.tgt.size()});
    // Both sides spell their text (normalized, as the best segmentation spells it).
    CHECK(decode_target(d, x.tgt) == decode_target(d, best.tgt));
    auto source_text = [&](const Ids& ids) { return d.src_spm->decode(d.src_vocab.decode(ids)); };
    CHECK(source_text(x.src) == source_text(best.src));
    differ += x.src != e1->examples[i].src;
    same_again += x.src == again->examples[i].src && x.tgt == again->examples[i].tgt;
    other_best += x.src != best.src;
  }
  REQUIRE(e0->examples.size() == d.train.examples.size());
  CHECK(e0->text.size() == d.train.text.size());
  CHECK(same_again == static_cast<int>(d.train.examples.size()));
  CHECK(differ > 100);      // another epoch, other draws
  CHECK(other_best > 100);  // not the best segmentation
  CHECK(drawn_longest <= longest);
  CHECK_THROWS_WITH(SubwordSampler(d, 0.0, 1), Catch::Contains("alpha"));
  DataConfig chars = c;
  chars.tokenizer = qkv::data::TokenizerKind::chars;
  chars.spm_alpha = 0.1;
  CHECK_THROWS_WITH(validate(chars), Catch::Contains("data.spm_alpha"));
  c.spm_alpha = 1.5;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.spm_alpha: must be in [0, 1]"));
}
