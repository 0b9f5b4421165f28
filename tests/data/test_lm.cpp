// Language-model data (data/lm.hpp, data/text_file.hpp): the character vocabulary and the
// 90/10 split of nanoGPT, plain and gzip files, windows and their shifted labels, the seeded
// loader and its exact resume, and the errors.
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>

#include "data/config.hpp"
#include "data/lm.hpp"
#include "data/text_file.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;
using namespace qkv::testing;

namespace {

std::string gzip_file(const std::string& name, const std::string& content) {
  const std::string p = scratch(name);
  gzFile f = gzopen(p.c_str(), "wb9");
  REQUIRE(f);
  REQUIRE(gzwrite(f, content.data(), static_cast<unsigned>(content.size())) ==
          static_cast<int>(content.size()));
  gzclose(f);
  return p;
}

// 200 characters of a small alphabet, with a newline and a non-ASCII character.
std::string sample_text() {
  std::string s;
  for (int i = 0; i < 40; ++i) s += (i % 7 == 0) ? "ab\n" : (i % 5 == 0 ? "caf\xc3\xa9 " : "bca ");
  return s;
}

}  // namespace

TEST_CASE("lm corpus: sorted character vocabulary, nanoGPT's 90/10 split, plain and gzip") {
  const std::string text = sample_text();
  const LmCorpus plain = load_lm_corpus(write_file("lm.txt", text), TokenizerKind::chars);
  const LmCorpus gz = load_lm_corpus(gzip_file("lm.txt.gz", text), TokenizerKind::chars);
  CHECK(plain.vocab == gz.vocab);
  CHECK(plain.train == gz.train);
  CHECK(plain.valid == gz.valid);
  // sorted by code point, no specials: \n, space, a, b, c, f, e-acute
  REQUIRE(plain.vocab.size() == 7);
  CHECK(plain.vocab.token(0) == "\n");
  CHECK(plain.vocab.token(1) == " ");
  CHECK(plain.vocab.token(6) == "\xc3\xa9");
  CHECK(plain.vocab.pad() == -1);
  const size_t chars = plain.train.size() + plain.valid.size();
  CHECK(plain.train.size() == static_cast<size_t>(0.9 * static_cast<double>(chars)));
  // the streams decode back to the text, in order
  std::string back;
  for (int64_t id : plain.train) back += plain.vocab.token(id);
  for (int64_t id : plain.valid) back += plain.vocab.token(id);
  CHECK(back == text);
}

TEST_CASE("lm batches: windows at the offsets, labels shifted by one, every label counts") {
  const Ids tokens = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const Batch b = lm_batch(tokens, {0, 5, 6}, 3);
  CHECK(b.tgt_in.shape() == Shape{3, 3});
  CHECK(to_vector<int64_t>(b.tgt_in) == std::vector<int64_t>{0, 1, 2, 5, 6, 7, 6, 7, 8});
  CHECK(to_vector<int64_t>(b.tgt_out) == std::vector<int64_t>{1, 2, 3, 6, 7, 8, 7, 8, 9});
  CHECK(!b.src.defined());
  CHECK(!b.tgt_mask.defined());
  CHECK(b.tgt_tokens == 9);
  CHECK_THROWS_WITH(lm_batch(tokens, {7}, 3), Catch::Contains("past the stream's 10 tokens"));
  // offsets stay where a whole window and its labels fit
  Generator g(3);
  for (int64_t o : lm_offsets(10, 3, 500, g)) CHECK((o >= 0 && o <= 6));
}

TEST_CASE("LmLoader: seeded, and restore() continues exactly") {
  auto tokens = std::make_shared<const Ids>([] {
    Ids t(1000);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int64_t>(i % 13);
    return t;
  }());
  LmLoader a(tokens, 8, 4, 42), b(tokens, 8, 4, 42), c(tokens, 8, 4, 43);
  CHECK(a.next().indices == b.next().indices);
  CHECK(a.next().indices != c.next().indices);
  const LoaderState saved = a.state();
  CHECK(saved.index == 2);
  const std::vector<int64_t> third = a.next().indices;
  LmLoader resumed(tokens, 8, 4, 42);
  resumed.restore(saved);
  CHECK(resumed.next().indices == third);
  CHECK(resumed.state() == a.state());
  // sharded: two ranks split each global batch's rows
  LmLoader r0(tokens, 8, 4, 42, 0, 2), r1(tokens, 8, 4, 42, 1, 2), whole(tokens, 8, 4, 42);
  const auto all = whole.next().indices, x = r0.next().indices, y = r1.next().indices;
  CHECK(x == std::vector<int64_t>{all[0], all[2]});
  CHECK(y == std::vector<int64_t>{all[1], all[3]});
}

TEST_CASE("lm data errors name the file, the key or the characters") {
  CHECK_THROWS_WITH(read_text_file(scratch("missing.txt")), Catch::Contains("no such file"));
  std::string gz = gzip_file("trunc.gz", sample_text());
  std::filesystem::resize_file(gz, std::filesystem::file_size(gz) - 12);
  CHECK_THROWS_WITH(read_text_file(gz), Catch::Contains("gzip"));
  const std::string path = write_file("lm2.txt", sample_text());
  CHECK_THROWS_WITH(load_lm_corpus(path, TokenizerKind::words),
                    Catch::Contains("data.tokenizer") && Catch::Contains("sentencepiece"));
  DataConfig c;
  c.task = qkv::data::TaskKind::lm;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.path: is required for task lm"));
  c.path = path;
  c.block_size = 50;  // the validation text is 20 characters
  CHECK_THROWS_WITH(load_data(c), Catch::Contains("data.block_size"));
  const Vocab v = load_lm_corpus(path, TokenizerKind::chars).vocab;
  CHECK(encode_chars("abc", v, "generate").size() == 3);
  CHECK_THROWS_WITH(encode_chars("abzQz", v, "generate"),
                    Catch::Contains("characters 'z', 'Q' are not in the model's vocabulary"));
}

TEST_CASE("lm corpus with SentencePiece: trained on the training lines, <eos> for line breaks") {
  // 300 short lines; the 90% cut falls at a line break.
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += (i % 3 == 0   ? "the king is dead"
             : i % 3 == 1 ? "long live the king"
                          : "the queen") +
            std::string("\n");
  const std::string path = write_file("spm_lm.txt", text);
  LmOptions o;
  o.tokenizer = qkv::data::TokenizerKind::sentencepiece;
  o.spm.vocab_size = 20;
  const LmCorpus c = load_lm_corpus(path, o);
  REQUIRE(c.spm);
  CHECK(c.vocab.size() == 20);
  const auto eos_count = [&](const Ids& ids) {
    return std::count(ids.begin(), ids.end(), c.vocab.eos());
  };
  // every line break is one <eos>: 270 lines train (90% of the bytes), 30 validate
  CHECK(eos_count(c.train) + eos_count(c.valid) == 300);
  CHECK(eos_count(c.train) == 270);
  CHECK(c.train.back() == c.vocab.eos());

  // the same text and options give the same model (deterministic training)
  const LmCorpus again = load_lm_corpus(path, o);
  CHECK(again.spm->serialized() == c.spm->serialized());
  CHECK(again.train == c.train);

  // text <-> ids: encode_lm_text as the corpus was encoded, LmDetokenizer streams it back
  const std::string sample = "the king is dead\nlong live the queen\n";
  const Ids ids = encode_lm_text(sample, c.vocab, c.spm.get(), "test");
  CHECK(std::count(ids.begin(), ids.end(), c.vocab.eos()) == 2);
  LmDetokenizer detok(c.vocab, true);
  std::string back;
  for (const int64_t id : ids) back += detok.next(id);
  CHECK(back == sample);

  // a saved model is loaded, not trained again
  const std::string saved = scratch("spm_lm.model");
  {
    std::ofstream f(saved, std::ios::binary);
    f << c.spm->serialized();
  }
  LmOptions other = o;
  other.spm.vocab_size = 16;  // would train a different model
  other.spm_model = saved;
  CHECK(load_lm_corpus(path, other).vocab.size() == 20);

  // characters: the detokenizer is the identity
  const LmCorpus chars = load_lm_corpus(path, TokenizerKind::chars);
  LmDetokenizer plain(chars.vocab, false);
  std::string text_back;
  for (const int64_t id : encode_lm_text("the king\n", chars.vocab, nullptr, "test"))
    text_back += plain.next(id);
  CHECK(text_back == "the king\n");
}
