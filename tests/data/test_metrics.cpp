#include <catch2/catch.hpp>

#include <cmath>

#include "data/metrics.hpp"

using namespace qkv;
using namespace qkv::data;

using V = std::vector<std::string>;

TEST_CASE("13a tokenizer: mteval-v13a's rules, worked by hand") {
  CHECK(tokenize_13a("Hello, world.") == "Hello , world .");
  CHECK(tokenize_13a("3.14 and 1,000 people") == "3.14 and 1,000 people");  // digits both sides
  CHECK(tokenize_13a("In 1990-2000 a well-known e.g. case") ==
        "In 1990 - 2000 a well-known e . g . case");  // dash split only after a digit
  CHECK(tokenize_13a("&quot;Hi&quot; &amp; bye &lt;3 &gt;") == "\" Hi \" & bye < 3 >");
  CHECK(tokenize_13a("&amp;lt;") == "<");  // sequential replaces, as str.replace
  CHECK(tokenize_13a("don't (stop) $5 50% a/b x:y") == "don't ( stop ) $ 5 50 % a / b x : y");
  CHECK(tokenize_13a("  spaced \t out  ") == "spaced out");
  CHECK(tokenize_13a("end.. ,x") == "end . . , x");
  CHECK(tokenize_13a("<skipped>cut-\nline") == "cutline");
  CHECK(tokenize_13a("Straße. Über, «ja»!") == "Straße . Über , «ja» !");  // non-ASCII stays
  CHECK(tokenize_13a("").empty());
}

TEST_CASE("BLEU: perfect, empty, brevity penalty and exp smoothing, worked by hand") {
  const std::string ref = "The cat sat on the mat.";
  BleuScore s = corpus_bleu({ref}, {ref});
  CHECK(s.score == Approx(100.0));
  CHECK(s.bp == 1.0);
  CHECK(s.signature == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x.x");
  CHECK(corpus_bleu({""}, {ref}).score == 0.0);
  CHECK(corpus_bleu({""}, {ref}).bp == 0.0);
  CHECK(corpus_bleu({"dog"}, {"cat"}).score == 0.0);  // no match of any order

  // 5 of 6 reference words, every n-gram matching: only the brevity penalty exp(1 - 6/5).
  s = corpus_bleu({"the cat sat on the"}, {"the cat sat on the mat"});
  CHECK(s.precisions == std::vector<double>{100, 100, 100, 100});
  CHECK(s.score == Approx(100 * std::exp(1.0 - 6.0 / 5.0)).epsilon(1e-12));
  // Longer than the reference: no penalty.
  CHECK(corpus_bleu({"the cat sat on the mat mat"}, {"the cat sat on the mat"}).bp == 1.0);

  // a b c d e / a b x d e: 4/5 unigrams, 2/4 bigrams, 0/3 trigrams, 0/2 4-grams. Exp
  // smoothing: the first zero order gets 1 / (2 * 3), the second 1 / (4 * 2).
  s = corpus_bleu({"a b c d e"}, {"a b x d e"});
  CHECK(s.correct == std::vector<int64_t>{4, 2, 0, 0});
  CHECK(s.total == std::vector<int64_t>{5, 4, 3, 2});
  CHECK(s.precisions[2] == Approx(100.0 / 6));
  CHECK(s.precisions[3] == Approx(100.0 / 8));
  CHECK(s.score == Approx(std::pow(80.0 * 50.0 * (100.0 / 6) * 12.5, 0.25)).epsilon(1e-12));
  // A hypothesis shorter than 4 tokens has no 4-grams: sacreBLEU scores it 0.
  CHECK(corpus_bleu({"a b c"}, {"a b c"}).score == 0.0);
  // Clipping: "the the the" earns one "the" per reference occurrence.
  CHECK(corpus_bleu({"the the the the"}, {"the cat on the mat"}).correct[0] == 2);

  // Case: mixed by default, lowercase on request (with its signature).
  CHECK(corpus_bleu({"THE CAT SAT ON THE MAT"}, {"the cat sat on the mat"}).score == 0.0);
  s = corpus_bleu({"THE CAT SAT ON THE MAT"}, {"the cat sat on the mat"}, true);
  CHECK(s.score == Approx(100.0));
  CHECK(s.signature.find("case:lc") != std::string::npos);
  CHECK_THROWS_WITH(corpus_bleu({"a"}, {"a", "b"}), Catch::Contains("line-aligned"));
}

TEST_CASE("BLEU: corpus-level statistics are not averaged sentence scores") {
  const V hyps = {"the cat sat on the mat", "a b c d e"};
  const V refs = {"the cat sat on the mat", "a b x d e"};
  const BleuScore corpus = corpus_bleu(hyps, refs);
  // Summed counts: 10/11, 7/9, 4/7, 3/5, equal lengths.
  CHECK(corpus.correct == std::vector<int64_t>{10, 7, 4, 3});
  CHECK(corpus.total == std::vector<int64_t>{11, 9, 7, 5});
  const double want = 100 * std::pow(10.0 / 11 * 7.0 / 9 * 4.0 / 7 * 3.0 / 5, 0.25);
  CHECK(corpus.score == Approx(want).epsilon(1e-12));
  const double averaged =
      (corpus_bleu({hyps[0]}, {refs[0]}).score + corpus_bleu({hyps[1]}, {refs[1]}).score) / 2;
  CHECK(averaged == Approx((100 + std::pow(80.0 * 50.0 * (100.0 / 6) * 12.5, 0.25)) / 2));
  CHECK(std::abs(corpus.score - averaged) > 4);  // 70.17 against 65.11
}

TEST_CASE("BLEU: non-ASCII text is compared by whole words") {
  const std::string ref = "Ein Mann läuft über die Straße.";
  CHECK(corpus_bleu({ref}, {ref}).score == Approx(100.0));
  const BleuScore s = corpus_bleu({"Ein Mann lauft uber die Straße."}, {ref});
  CHECK(s.correct[0] == 5);  // Ein Mann die Straße .
  CHECK(s.total[0] == 7);
}

TEST_CASE("chrF: character 6-grams, beta 2, whitespace removed, worked by hand") {
  const std::string ref = "The cat sat on the mat.";
  ChrfScore c = corpus_chrf({ref}, {ref});
  CHECK(c.score == Approx(100.0));
  CHECK(c.signature == "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.x.x");
  CHECK(corpus_chrf({""}, {ref}).score == 0.0);
  // Spaces do not count: the same characters spaced differently score 100.
  CHECK(corpus_chrf({"Thecat sat  on themat."}, {ref}).score == Approx(100.0));
  // "ab" against "abc": orders 1 and 2 on both sides. P = (2/2 + 1/1) / 2 = 1,
  // R = (2/3 + 1/2) / 2 = 7/12; F2 = 5 P R / (4 P + R).
  const double p = 1.0, r = 7.0 / 12;
  CHECK(corpus_chrf({"ab"}, {"abc"}).score == Approx(100 * 5 * p * r / (4 * p + r)));
  // Code points, not bytes: "ää" against "ä" is P1 = 1/2, R1 = 1 (order 2 has no reference
  // n-grams), F2 = 5 * 0.5 / (4 * 0.5 + 1) = 5/6. Bytes would give another number.
  CHECK(corpus_chrf({"ää"}, {"ä"}).score == Approx(100 * 2.5 / 3));
  CHECK(corpus_chrf({"é"}, {"e"}).score == 0.0);
  // Lowercase option.
  CHECK(corpus_chrf({"ÄB"}, {"äb"}).score == 0.0);
  c = corpus_chrf({"ÄB"}, {"äb"}, true);
  CHECK(c.score == Approx(100.0));
  CHECK(c.signature.find("case:lc") != std::string::npos);
}

TEST_CASE("chrF: corpus statistics are summed before the F-score") {
  // "ab"/"abc" and "x"/"x": summed order 1 = 3 hyp, 4 ref, 3 match; order 2 = 1, 2, 1
  // (the second pair has no bigrams).
  const double p = (3.0 / 3 + 1.0 / 1) / 2, r = (3.0 / 4 + 1.0 / 2) / 2;
  CHECK(corpus_chrf({"ab", "x"}, {"abc", "x"}).score ==
        Approx(100 * 5 * p * r / (4 * p + r)).epsilon(1e-12));
}
