// The head scores (interp/head_scores.hpp) on attention patterns built by hand, whose scores
// follow from the definitions by counting: perfect heads, uniform heads, padding, masked rows,
// the exclusions, and every malformed probe.
#include <catch2/catch.hpp>

#include <cmath>

#include "interp/head_scores.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::interp;
using namespace qkv::testing;

namespace {

// (B, n) int64 token ids from rows of equal length.
Tensor ids_of(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return from_vector<int64_t>(
      flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

// A (B, h, n, m) float64 pattern with weight w(b, h, i, j).
Tensor pattern_of(const Shape& s,
                  const std::function<double(int64_t, int64_t, int64_t, int64_t)>& w) {
  return build(s, [&](const Shape& x) { return w(x[0], x[1], x[2], x[3]); });
}

double uniform_causal(int64_t i, int64_t j) {
  return j <= i ? 1.0 / static_cast<double>(i + 1) : 0;
}

// sum_{k=1}^{n} 1/k
double harmonic(int64_t n) {
  double s = 0;
  for (int64_t k = 1; k <= n; ++k) s += 1.0 / static_cast<double>(k);
  return s;
}

}  // namespace

TEST_CASE("previous_token: a perfect head scores (n - 1) / n, and 1 without the first key") {
  const int64_t n = 6;
  AttentionProbe p;
  // head 0 attends to the previous position (query 0, having none, to itself); head 1 uniformly
  p.pattern = pattern_of({2, 2, n, n}, [](int64_t, int64_t h, int64_t i, int64_t j) {
    if (h == 1) return uniform_causal(i, j);
    return j == std::max<int64_t>(i - 1, 0) ? 1.0 : 0.0;
  });
  std::vector<double> s = score_previous_token(p, {});
  CHECK(s[0] == Approx(5.0 / 6).epsilon(1e-15));
  // uniform: row i >= 1 puts 1 / (i + 1) on i - 1, so (1/n) (H_n - 1)
  CHECK(s[1] == Approx((harmonic(n) - 1) / n).epsilon(1e-14));
  // without key 0: rows 0 and 1 lose their whole mass, the others keep it on the pattern
  s = score_previous_token(p, {.exclude_bos = true});
  CHECK(s[0] == Approx(1.0).epsilon(1e-15));
  // float32 weights give the same scores, to float32's precision
  p.pattern = p.pattern.to(DType::f32);
  s = score_previous_token(p, {});
  CHECK(s[0] == Approx(5.0 / 6).epsilon(1e-7));
  CHECK(s[1] == Approx((harmonic(n) - 1) / n).epsilon(1e-7));
}

TEST_CASE("duplicate_token: the share of mass on earlier copies of the query's token") {
  AttentionProbe p;
  // rows 2 (5 at 0), 4 (7 at 1) and 5 (5 at 0 and 2) have earlier copies
  p.ids = ids_of({{5, 7, 5, 9, 7, 5}});
  const std::vector<std::vector<int64_t>> copies = {{}, {}, {0}, {}, {1}, {0, 2}};
  p.pattern = pattern_of({1, 2, 6, 6}, [&](int64_t, int64_t h, int64_t i, int64_t j) {
    if (h == 1) return uniform_causal(i, j);
    const auto& c = copies[i];
    if (c.empty()) return j == i ? 1.0 : 0.0;  // no copy: the head rests on itself
    return std::count(c.begin(), c.end(), j) ? 1.0 / static_cast<double>(c.size()) : 0.0;
  });
  std::vector<double> s = score_duplicate_token(p, {});
  CHECK(s[0] == Approx(3.0 / 6).epsilon(1e-15));
  CHECK(s[1] == Approx((1.0 / 3 + 1.0 / 5 + 2.0 / 6) / 6).epsilon(1e-14));
  // without the query's own position the resting rows count for nothing
  s = score_duplicate_token(p, {.exclude_current_token = true});
  CHECK(s[0] == Approx(1.0).epsilon(1e-15));
  // head 1 without its diagonal: row i keeps i / (i + 1), rows 1..5
  CHECK(s[1] == Approx((1.0 / 3 + 1.0 / 5 + 2.0 / 6) / (6 - harmonic(6))).epsilon(1e-14));
}

TEST_CASE("induction: a head on the token after the earlier copy scores 1 on repeated tokens") {
  // [bos] r r with r = 4 5 6 7 (L = 4, n = 9): query 5 + k (token r_k) looks for 2 + k
  const int64_t bos = 1, n = 9;
  AttentionProbe p;
  p.ids = ids_of({{bos, 4, 5, 6, 7, 4, 5, 6, 7}, {bos, 4, 5, 6, 7, 4, 5, 6, 7}});
  // head 0: the induction head, resting on bos in the first copy; head 1: a duplicate-token
  // head (on the earlier copy itself), also resting on bos
  p.pattern = pattern_of({2, 2, n, n}, [](int64_t, int64_t h, int64_t i, int64_t j) {
    if (i < 5) return j == 0 ? 1.0 : 0.0;
    return j == (h == 0 ? i - 3 : i - 4) ? 1.0 : 0.0;
  });
  std::vector<double> s = score_induction(p, {});
  CHECK(s[0] == Approx(4.0 / 9).epsilon(1e-15));  // L / (2L + 1): the first copy's rows count
  CHECK(s[1] == 0);
  s = score_induction(p, {.exclude_bos = true});
  CHECK(s[0] == Approx(1.0).epsilon(1e-15));
  CHECK(s[1] == 0);
  // and the duplicate-token score tells them apart the other way round
  s = score_duplicate_token(p, {.exclude_bos = true});
  CHECK(s[0] == 0);
  CHECK(s[1] == Approx(1.0).epsilon(1e-15));
}

TEST_CASE("pattern scores: a padded sequence scores as its real prefix alone") {
  // sequence 1 is sequence 0's first 4 tokens, then padding (id 0)
  AttentionProbe whole, padded;
  whole.ids = ids_of({{3, 4, 3, 4}});
  padded.ids = ids_of({{3, 4, 3, 4, 0, 0}});
  padded.pad_id = 0;
  Generator g(5);
  const Tensor w = softmax(randn({1, 3, 6, 6}, g, DType::f64), -1);
  // the padded run's real block, renormalised as a 4-key softmax would have it
  const Tensor real = w.narrow(2, 0, 4).narrow(3, 0, 4);
  whole.pattern = div(real, sum(real, {-1}, true));
  padded.pattern = concat({whole.pattern, zeros({1, 3, 4, 2}, DType::f64)}, 3);
  padded.pattern = concat({padded.pattern, w.narrow(2, 4, 2)}, 2);  // padded rows: anything
  for (HeadScore s : {HeadScore::previous_token, HeadScore::duplicate_token, HeadScore::induction,
                      HeadScore::entropy}) {
    INFO(name_of(s));
    const std::vector<double> a = head_score(s, whole), b = head_score(s, padded);
    for (size_t h = 0; h < a.size(); ++h) CHECK(b[h] == Approx(a[h]).epsilon(1e-14));
  }
  // weight on the padded keys (an unmasked pattern) counts for nothing in the pattern shares
  AttentionProbe leaky = padded;
  leaky.pattern = padded.pattern.clone();
  leaky.pattern.narrow(2, 0, 4).narrow(3, 4, 2).copy_(full({}, 0.3, DType::f64));
  for (HeadScore s :
       {HeadScore::previous_token, HeadScore::duplicate_token, HeadScore::induction}) {
    INFO(name_of(s));
    const std::vector<double> a = head_score(s, whole), b = head_score(s, leaky);
    for (size_t h = 0; h < a.size(); ++h) CHECK(b[h] == Approx(a[h]).epsilon(1e-14));
  }
}

TEST_CASE("entropy: the mean over query rows with a key, per head") {
  const int64_t n = 4;
  AttentionProbe p;
  // sequence 1 is 2 tokens and 2 pads; its padded rows attend uniformly to the 2 real keys
  p.ids = ids_of({{5, 6, 7, 8}, {5, 6, 0, 0}});
  p.pattern = pattern_of({2, 2, n, n}, [](int64_t b, int64_t h, int64_t i, int64_t j) {
    if (h == 1 && b == 0 && i == 0) return 0.0;  // a fully masked row: left out
    if (b == 1)
      return j <= std::min<int64_t>(i, 1) ? 1.0 / static_cast<double>(std::min<int64_t>(i, 1) + 1)
                                          : 0.0;
    return uniform_causal(i, j);
  });
  const double l2 = std::log(2.0), l3 = std::log(3.0), l4 = std::log(4.0);
  std::vector<double> s = score_entropy(p, {});
  CHECK(s[0] == Approx((l2 + l3 + l4 + l2 + l2 + l2) / 8).epsilon(1e-14));
  CHECK(s[1] == Approx((l2 + l3 + l4 + l2 + l2 + l2) / 7).epsilon(1e-14));
  p.pad_id = 0;  // the padded rows are left out too
  s = score_entropy(p, {});
  CHECK(s[0] == Approx((l2 + l3 + l4 + l2) / 6).epsilon(1e-14));
  CHECK(s[1] == Approx((l2 + l3 + l4 + l2) / 5).epsilon(1e-14));
  // one-hot rows have none; uniform rows over m keys have log m
  CHECK(score_entropy({.pattern = one_hot(zeros({1, 1, 3}, DType::i64), 5, DType::f64)}, {})[0] ==
        0);
  CHECK(score_entropy({.pattern = full({1, 2, 3, 5}, 0.2, DType::f32)}, {})[1] ==
        Approx(std::log(5.0)).epsilon(1e-7));
}

TEST_CASE("alignment_position: the diagonal from first to last, halves rounded up") {
  const auto positions = [](int64_t t, int64_t s) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < t; ++i) out.push_back(alignment_position(i, t, s));
    return out;
  };
  CHECK(positions(3, 5) == std::vector<int64_t>{0, 2, 4});
  CHECK(positions(4, 3) == std::vector<int64_t>{0, 1, 1, 2});     // 2/3 -> 1, 4/3 -> 1
  CHECK(positions(3, 4) == std::vector<int64_t>{0, 2, 3});        // 1.5 -> 2
  CHECK(positions(5, 3) == std::vector<int64_t>{0, 1, 1, 2, 2});  // 0.5 -> 1, 1.5 -> 2
  CHECK(positions(2, 2) == std::vector<int64_t>{0, 1});
  CHECK(positions(1, 7) == std::vector<int64_t>{0});
  CHECK(positions(4, 1) == std::vector<int64_t>{0, 0, 0, 0});
  CHECK_ERROR_MENTIONS(alignment_position(3, 3, 4), "alignment_position", "i 3");
  CHECK_ERROR_MENTIONS(alignment_position(0, 2, 0), "alignment_position", "S 0");
}

TEST_CASE("alignment: the share of cross-attention on the diagonal, over real tokens") {
  // target 4 tokens over source 5; sequence 1: target 3 + pad, source 4 + pad (pad id 0)
  AttentionProbe p;
  p.ids = ids_of({{5, 6, 7, 8}, {5, 6, 7, 0}});
  p.key_ids = ids_of({{9, 9, 9, 9, 9}, {9, 9, 9, 9, 0}});
  p.pad_id = 0;
  const int64_t t[] = {4, 3}, s[] = {5, 4};
  // head 0 on the aligned position; head 1 uniform over the real source; head 2 one past
  // the aligned position (or one before, at the end)
  p.pattern = pattern_of({2, 3, 4, 5}, [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    if (i >= t[b]) return 0.2;  // padded rows: ignored
    if (j >= s[b]) return 0.0;
    const int64_t a = alignment_position(i, t[b], s[b]);
    if (h == 0) return j == a ? 1.0 : 0.0;
    if (h == 1) return 1.0 / static_cast<double>(s[b]);
    return j == (a + 1 < s[b] ? a + 1 : a - 1) ? 1.0 : 0.0;
  });
  std::vector<double> v = score_alignment(p, {});
  CHECK(v[0] == Approx(1.0).epsilon(1e-15));
  CHECK(v[1] == Approx((1.0 / 5 + 1.0 / 4) / 2).epsilon(1e-15));
  CHECK(v[2] == 0);
  v = score_alignment(p, {.alignment_window = 1});
  CHECK(v[0] == Approx(1.0).epsilon(1e-15));
  // aligned positions 0 1 3 4 (windows of 2, 3, 3, 2 keys of 5) and 0 2 3 (2, 3, 2 of 4)
  CHECK(v[1] == Approx((10.0 / 20 + 7.0 / 12) / 2).epsilon(1e-15));
  CHECK(v[2] == Approx(1.0).epsilon(1e-15));
}

TEST_CASE("head_score: every line of the registry has a name and calls its function") {
  AttentionProbe p;
  p.ids = ids_of({{1, 4, 5, 4, 5}});
  Generator g(8);
  p.pattern = softmax(randn({1, 2, 5, 5}, g, DType::f64), -1);
  for (const EnumName<HeadScore>& e : kHeadScoreNames) {
    CHECK(parse_name<HeadScore>(e.name, "score") == e.value);
    CHECK(name_of(e.value) == e.name);
  }
  CHECK(head_score(HeadScore::previous_token, p) == score_previous_token(p, {}));
  CHECK(head_score(HeadScore::duplicate_token, p) == score_duplicate_token(p, {}));
  CHECK(head_score(HeadScore::induction, p) == score_induction(p, {}));
  CHECK(head_score(HeadScore::entropy, p) == score_entropy(p, {}));
  CHECK(head_score(HeadScore::alignment, p) == score_alignment(p, {}));
  CHECK(attention_of(HeadScore::induction) == ScoredAttention::self);
  CHECK(attention_of(HeadScore::alignment) == ScoredAttention::cross);
  CHECK(attention_of(HeadScore::entropy) == ScoredAttention::any);
  CHECK_ERROR_MENTIONS(parse_name<HeadScore>("inducton", "score"), "score", "'induction'");
}

TEST_CASE("head scores: a malformed probe is one error naming the score and the shapes") {
  Generator g(9);
  AttentionProbe p;
  p.pattern = softmax(randn({2, 3, 4, 4}, g, DType::f64), -1);
  p.ids = ids_of({{1, 2, 3, 4}, {1, 2, 3, 4}});
  CHECK_ERROR_MENTIONS(score_entropy({.pattern = zeros({3, 4, 4})}, {}), "entropy", "(3, 4, 4)");
  CHECK_ERROR_MENTIONS(score_entropy({.pattern = zeros({1, 1, 2, 2}, DType::i64)}, {}), "entropy",
                       "float32 or float64");
  CHECK_ERROR_MENTIONS(score_induction({.pattern = p.pattern}, {}), "induction", "token ids");
  CHECK_ERROR_MENTIONS(score_previous_token({.pattern = zeros({2, 3, 4, 5})}, {}), "previous_token",
                       "square", "(2, 3, 4, 5)");
  CHECK_ERROR_MENTIONS(
      score_duplicate_token({.pattern = p.pattern, .ids = ids_of({{1, 2, 3}})}, {}),
      "duplicate_token", "(2, 4)", "(1, 3)");
  AttentionProbe gap = p;
  gap.ids = ids_of({{1, 2, 3, 4}, {1, 0, 3, 0}});
  gap.pad_id = 0;
  CHECK_ERROR_MENTIONS(score_duplicate_token(gap, {}), "duplicate_token", "padding must end",
                       "sequence 1", "position 2");
  CHECK_ERROR_MENTIONS(score_entropy({.pattern = p.pattern, .pad_id = 0}, {}), "entropy", "pad_id");
  // a head with no mass left: all on the diagonal, which is excluded
  AttentionProbe diag = p;
  diag.pattern = pattern_of(
      {2, 3, 4, 4}, [](int64_t, int64_t, int64_t i, int64_t j) { return i == j ? 1.0 : 0.0; });
  CHECK_ERROR_MENTIONS(score_previous_token(diag, {.exclude_current_token = true}),
                       "previous_token", "head 0 of sequence 0", "no attention mass");
  CHECK_ERROR_MENTIONS(score_entropy({.pattern = zeros({1, 2, 3, 3})}, {}), "entropy",
                       "no query row");
  AttentionProbe cross = {
      .pattern = softmax(randn({2, 1, 4, 3}, g), -1), .ids = p.ids, .pad_id = 0};
  CHECK_ERROR_MENTIONS(score_alignment(cross, {}), "alignment", "key_ids");
  cross.key_ids = ids_of({{1, 2, 3}});
  CHECK_ERROR_MENTIONS(score_alignment(cross, {}), "alignment", "key_ids", "(2, 3)", "(1, 3)");
  cross.key_ids = ids_of({{1, 2, 3}, {1, 2, 3}});
  CHECK_ERROR_MENTIONS(score_alignment(cross, {.alignment_window = -1}), "alignment", "window");
  CHECK_ERROR_MENTIONS(pattern_share(p, zeros({2, 4, 4}), {}, "mine"), "mine", "float64");
}
