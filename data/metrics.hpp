// Corpus BLEU and chrF as sacreBLEU 2.x computes them with its defaults: a C++
// reimplementation of its published algorithm (sacreBLEU itself is not used or needed).
//
// BLEU: each line is stripped of trailing whitespace, optionally lowercased, and tokenized by
// the "13a" rules (mteval-v13a: unescape &quot; &amp; &lt; &gt;, split off ASCII punctuation
// and symbols, periods and commas unless next to a digit, dashes after a digit). Clipped
// n-gram matches (n = 1..4) and lengths are summed over the corpus, then
//   BLEU = BP * exp(mean_n log p_n),  BP = exp(1 - ref_len / hyp_len) when hyp_len < ref_len,
// with "exp" smoothing: the k-th order with zero matches gets p_n = 1 / (2^k * total_n).
// No matches at all (or no n-grams of some order) gives 0.
//
// chrF: whitespace is removed, then character n-grams (n = 1..6, code points) are counted per
// line and summed over the corpus; precision and recall are averaged over the orders that have
// n-grams on both sides, and chrF = (1 + b^2) P R / (b^2 P + R) with b = 2. No word n-grams.
//
// Scores are on sacreBLEU's 0..100 scale. Lowercasing uses to_lower_utf8 (simple one-to-one
// mappings); Python's str.lower() differs only for rare characters (e.g. U+0130).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::data {

// The 13a tokenization of one line, tokens separated by single spaces.
std::string tokenize_13a(std::string_view line);

struct BleuScore {
  double score = 0;                // 0..100
  std::vector<int64_t> correct;    // clipped n-gram matches, n = 1..4
  std::vector<int64_t> total;      // hypothesis n-grams, n = 1..4
  std::vector<double> precisions;  // 0..100, after smoothing
  double bp = 0;                   // brevity penalty
  int64_t hyp_len = 0, ref_len = 0;
  std::string signature;       // nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x.x
  std::string format() const;  // "BLEU = 35.12 66.1/42.0/28.3/19.4 (BP = 1.000 ratio = ...)"
};

struct ChrfScore {
  double score = 0;            // 0..100
  std::string signature;       // nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.x.x
  std::string format() const;  // "chrF2 = 61.23"
};

// One reference per hypothesis; hyps and refs must have the same length (qkv::Error).
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      bool lowercase = false);
ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      bool lowercase = false);

// BLEU from already tokenized text (tokens split on whitespace, no 13a, no lowercasing): the
// definition NLTK's corpus_bleu shares, used to cross-check the n-gram statistics.
BleuScore corpus_bleu_tokenized(const std::vector<std::string>& hyps,
                                const std::vector<std::string>& refs);

// The note printed with every score: these are qkv's numbers, not sacreBLEU's own.
inline constexpr const char* kMetricsImplementation =
    "qkv's C++ reimplementation of sacreBLEU 2.x defaults";

}  // namespace qkv::data
