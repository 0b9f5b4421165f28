#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "data/tokenizer.hpp"
#include "data/utf8.hpp"
#include "data/vocab.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

TEST_CASE("vocab: specials first, lookups, unknown -> <unk>") {
  const Vocab v = Vocab::with_specials({"a", "b"});
  CHECK(v.size() == 6);
  CHECK(v.pad() == 0);
  CHECK(v.bos() == 1);
  CHECK(v.eos() == 2);
  CHECK(v.unk() == 3);
  CHECK(v.id("a") == 4);
  CHECK(v.id("zzz") == v.unk());
  CHECK(v.token(5) == "b");
  CHECK_THROWS_AS(v.token(6), Error);
  CHECK_THROWS_AS(v.token(-1), Error);
  CHECK_THROWS_AS(Vocab({"x", "y", "x"}), Error);
  CHECK_THROWS_AS(Vocab({"x", kPad}), Error);  // <pad> must be 0
  // decode stops at <eos> and drops <pad> / <bos>
  CHECK(v.decode({1, 4, 0, 5, 2, 4}) == std::vector<std::string>{"a", "b"});
  CHECK(v.decode({1, 4, 2}, true) == std::vector<std::string>{kBos, "a", kEos});
}

TEST_CASE("vocab: without <unk>, an unknown token is an error") {
  const Vocab v(std::vector<std::string>{kPad, "1", "2"});
  CHECK(v.unk() == -1);
  CHECK(v.bos() == -1);
  CHECK(v.id("2") == 2);
  CHECK_THROWS_WITH(v.id("3"), Catch::Contains("'3'"));
}

TEST_CASE("vocab: build honours min_freq and max_size, ordered by frequency then bytes") {
  const std::vector<std::vector<std::string>> corpus = {
      {"b", "a", "c", "a"}, {"a", "b", "d"}, {"c", "b", "e"}};
  // counts: a 3, b 3, c 2, d 1, e 1
  const Vocab all = Vocab::build(corpus);
  CHECK(all.tokens() == std::vector<std::string>{kPad, kBos, kEos, kUnk, "a", "b", "c", "d", "e"});
  const Vocab frequent = Vocab::build(corpus, 2);
  CHECK(frequent.tokens() == std::vector<std::string>{kPad, kBos, kEos, kUnk, "a", "b", "c"});
  CHECK(frequent.id("d") == frequent.unk());
  const Vocab capped = Vocab::build(corpus, 1, 6);
  CHECK(capped.size() == 6);
  CHECK(capped.tokens().back() == "b");
  // order of the corpus does not matter
  const Vocab reversed = Vocab::build({corpus[2], corpus[1], corpus[0]});
  CHECK(reversed == all);
  CHECK_THROWS_AS(Vocab::build(corpus, 0), Error);
  CHECK_THROWS_AS(Vocab::build(corpus, 1, 3), Error);
}

TEST_CASE("vocab: save / load round-trips odd tokens, one per line") {
  const Vocab v = Vocab::with_specials({" ", "\\", "a\tb", "line\nbreak", "é", "\\n", "日本"});
  const std::string path = testing::scratch("vocab.txt");
  v.save(path);
  const Vocab w = Vocab::load(path);
  CHECK(w == v);
  CHECK(w.unk() == 3);
  // one token per line: 4 specials + 7 symbols
  std::ifstream f(path);
  int lines = 0;
  for (std::string l; std::getline(f, l);) ++lines;
  CHECK(lines == 11);
  const std::string bad = testing::write_file("vocab-bad.txt", "<pad>\na\nb\\q\n");
  CHECK_THROWS_WITH(Vocab::load(bad), Catch::Contains(":3:") && Catch::Contains("escape"));
  const std::string dup = testing::write_file("vocab-dup.txt", "<pad>\na\na\n");
  CHECK_THROWS_WITH(Vocab::load(dup), Catch::Contains("duplicate"));
  CHECK_THROWS_AS(Vocab::load(testing::scratch("missing.txt")), Error);
}

TEST_CASE("utf8: validation rejects malformed, overlong, surrogate and out-of-range bytes") {
  size_t at = 99;
  CHECK(valid_utf8("héllo 日本 🙂"));
  CHECK_FALSE(valid_utf8("ab\xC3", &at));  // truncated
  CHECK(at == 2);
  CHECK_FALSE(valid_utf8("\x80"));              // lone continuation
  CHECK_FALSE(valid_utf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  CHECK_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // U+110000
  CHECK_FALSE(valid_utf8("\xFF"));
  CHECK(split_chars("aé🙂") == std::vector<std::string>{"a", "é", "🙂"});
  CHECK(to_lower_utf8("ÉCOLE Straße ÀÖ ĞÜŁ ΑΩ ЖЁ") == "école straße àö ğüł αω жё");
}

TEST_CASE("tokenizer: char level round-trips exactly, spaces included") {
  for (const std::string s :
       {"3rd of March 2021", "  two  spaces ", "Ça va? 日本語 🙂", ""}) {
    const auto t = tokenize(s, TokenizerKind::chars);
    CHECK(detokenize(t) == s);
  }
  CHECK(tokenize("aé 1", TokenizerKind::chars) == std::vector<std::string>{"a", "é", " ", "1"});
  CHECK_THROWS_WITH(tokenize("ab\xFF", TokenizerKind::chars), Catch::Contains("byte 2"));
}

TEST_CASE("tokenizer: word level splits on whitespace and punctuation") {
  using V = std::vector<std::string>;
  CHECK(tokenize("tuesday, 3 mar 21", TokenizerKind::words) ==
        V{"tuesday", ",", " ", "3", " ", "mar", " ", "21"});
  CHECK(tokenize("2021.03.03", TokenizerKind::words) == V{"2021", ".", "03", ".", "03"});
  CHECK(tokenize("  Hi,   there!\t", TokenizerKind::words) == V{"Hi", ",", " ", "there", "!"});
  CHECK(tokenize("¿Qué tal?", TokenizerKind::words) == V{"¿", "Qué", " ", "tal", "?"});
  CHECK(tokenize("l'été — «oui»", TokenizerKind::words) ==
        V{"l", "'", "été", " ", "—", " ", "«", "oui", "»"});
  for (const std::string s :
       {"Tom isn't here.", "  Où   est-il ?  ", "3rd of March, 2021", "a\tb\nc", "日本語です。"}) {
    CHECK(detokenize(tokenize(s, TokenizerKind::words)) == normalize_space(s));
  }
}

TEST_CASE("tokenizer: encode / decode through a vocabulary, unknown -> <unk>") {
  const auto toks = tokenize("the cat sat. the end", TokenizerKind::words);
  const Vocab v = Vocab::build({toks});
  const std::string s = "the cat sat. the end";
  const auto ids = encode(s, TokenizerKind::words, v);
  CHECK(decode(ids, v) == s);
  const auto unk = encode("the dog sat", TokenizerKind::words, v);
  CHECK(unk[2] == v.unk());
  CHECK(decode(unk, v) == "the <unk> sat");
  // model output: <bos> ... <eos> then junk after it
  std::vector<int64_t> out{v.bos()};
  out.insert(out.end(), ids.begin(), ids.end());
  out.push_back(v.eos());
  out.push_back(ids[0]);
  CHECK(decode(out, v) == s);
  CHECK(parse_tokenizer("char") == TokenizerKind::chars);
  CHECK(parse_tokenizer("word") == TokenizerKind::words);
  CHECK_THROWS_AS(parse_tokenizer("bpe"), Error);
}
