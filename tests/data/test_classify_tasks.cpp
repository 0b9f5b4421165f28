// The classification tasks' generators (data/classify_tasks.hpp): the definitions on hand-built
// strings, every generated label against a checker written here another way, balanced classes,
// Dyck's near misses and depth bound, lengths, and determinism from the seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "data/classify_tasks.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {

constexpr int64_t kSamples = 10000;

// "([)]" -> ids of classify_vocab(dyck); "0110" -> ids of parity / majority's vocabulary.
Ids ids_of(ClassifyTask t, const std::string& s) {
  const Vocab v = classify_vocab(t);
  Ids out;
  for (const char c : s) out.push_back(v.id(std::string(1, c)));
  return out;
}

std::string text_of(ClassifyTask t, const Ids& ids) {
  const Vocab v = classify_vocab(t);
  std::string out;
  for (const int64_t id : ids) out += v.token(id);
  return out;
}

// The symbols of an example, without its <cls>.
std::string symbols_of(ClassifyTask t, const Example& e, bool cls = true) {
  REQUIRE(e.src.size() >= (cls ? 1u : 0u));
  if (cls) REQUIRE(e.src[0] == kClsId);
  return text_of(t, Ids(e.src.begin() + (cls ? 1 : 0), e.src.end()));
}

// ---- the checkers of this test, written without a stack

// Deletes "()" and "[]" until none is left: a well-nested string deletes to nothing.
bool reduces_to_empty(std::string s) {
  for (size_t at;
       (at = s.find("()")) != std::string::npos || (at = s.find("[]")) != std::string::npos;)
    s.erase(at, 2);
  return s.empty();
}

struct Heights {
  int64_t low = 0, high = 0, final = 0;  // over the prefixes (the empty one included)
};
Heights heights(const std::string& s) {
  Heights h;
  for (const char c : s) {
    h.final += (c == '(' || c == '[') ? 1 : -1;
    h.low = std::min(h.low, h.final);
    h.high = std::max(h.high, h.final);
  }
  return h;
}

// In Dyck-2 with depth at most D: well nested (and so its deepest nesting is its highest height).
int64_t dyck_checker(const std::string& s, int64_t depth) {
  return reduces_to_empty(s) && heights(s).high <= depth ? 1 : 0;
}
int64_t parity_checker(const std::string& bits) {
  int64_t x = 0;
  for (const char c : bits) x ^= c == '1';
  return x;
}
// The middle element of the sorted bits is the majority's (no ties).
int64_t majority_checker(std::string bits) {
  std::sort(bits.begin(), bits.end());
  return bits[bits.size() / 2] == '1' ? 1 : 0;
}

// Which near miss a negative is, read from the string alone.
std::string near_miss_kind(const std::string& s, int64_t depth) {
  const Heights h = heights(s);
  if (h.final != 0) return "flip";
  if (h.low < 0) return "early close";
  if (h.high > depth) return "too deep";
  return "type swap";  // well ordered heights, so a type mismatches
}

}  // namespace

TEST_CASE("classify tasks: the definitions and this test's checkers on hand-built strings") {
  const ClassifyTask D = ClassifyTask::dyck;
  const std::pair<std::string, int64_t> dyck_depth_2[] = {
      {"", 1},       {"()", 1},     {"[]", 1},   {"([])", 1},    {"()[]([])", 1}, {"(]", 0},
      {"([)]", 0},   {"(()", 0},    {"())(", 0}, {")(", 0},      {"((()))", 0},   {"[[]]]", 0},
      {"(([]))", 0}, {"[([])]", 0}, {"[(])", 0}, {"(())[[]]", 1}};
  for (const auto& [s, want] : dyck_depth_2) {
    INFO(s);
    CHECK(true_class(D, ids_of(D, s), 2) == want);
    CHECK(dyck_checker(s, 2) == want);
  }
  CHECK(true_class(D, ids_of(D, "((()))"), 3) == 1);  // the bound decides
  CHECK(true_class(D, ids_of(D, "(([]))"), 3) == 1);
  CHECK(dyck_checker("((()))", 3) == 1);

  for (const auto& [s, want] : {std::pair<std::string, int64_t>{"0", 0},
                                {"1", 1},
                                {"0110", 0},
                                {"111", 1},
                                {"1011", 1},
                                {"0000", 0}}) {
    INFO(s);
    CHECK(true_class(ClassifyTask::parity, ids_of(ClassifyTask::parity, s), 0) == want);
    CHECK(parity_checker(s) == want);
  }
  for (const auto& [s, want] : {std::pair<std::string, int64_t>{"1", 1},
                                {"0", 0},
                                {"110", 1},
                                {"100", 0},
                                {"0111", 1},
                                {"10100", 0}}) {
    INFO(s);
    CHECK(true_class(ClassifyTask::majority, ids_of(ClassifyTask::majority, s), 0) == want);
    CHECK(majority_checker(s) == want);
  }
  // an id that is no symbol of the task (<cls>, or a bracket for a bit string)
  CHECK_THROWS_AS(true_class(D, {kClsId, 5, 6}, 2), Error);
  CHECK_THROWS_AS(true_class(ClassifyTask::parity, {5, 7}, 2), Error);
}

TEST_CASE("classify tasks: vocabularies and class names") {
  const Vocab dyck = classify_vocab(ClassifyTask::dyck);
  CHECK(dyck.size() == 9);
  CHECK(dyck.pad() == 0);
  CHECK(dyck.token(kClsId) == kCls);
  CHECK(text_of(ClassifyTask::dyck, {5, 6, 7, 8}) == "()[]");
  for (ClassifyTask t : {ClassifyTask::parity, ClassifyTask::majority}) {
    const Vocab v = classify_vocab(t);
    CHECK(v.size() == 7);
    CHECK(v.token(kClsId) == kCls);
    CHECK(v.token(5) == "0");
    CHECK(v.token(6) == "1");
  }
  CHECK(class_names(ClassifyTask::dyck).tokens() ==
        std::vector<std::string>{"unbalanced", "balanced"});
  CHECK(class_names(ClassifyTask::parity).tokens() == std::vector<std::string>{"even", "odd"});
  CHECK(class_names(ClassifyTask::majority).tokens() == std::vector<std::string>{"0", "1"});
}

TEST_CASE("classify tasks: every label agrees with this test's checker, classes balanced") {
  const ClassifyOptions dyck{2, 24, 3, true}, bits{1, 20, 0, true};
  for (ClassifyTask t : {ClassifyTask::dyck, ClassifyTask::parity, ClassifyTask::majority}) {
    const ClassifyOptions& o = t == ClassifyTask::dyck ? dyck : bits;
    const Dataset ds = make_classify_task(t, o, kSamples, 17);
    REQUIRE(ds.size() == kSamples);
    CHECK(ds.name == std::string(name_of(t)));
    int64_t positives = 0;
    std::map<int64_t, int64_t> lengths;
    for (const Example& e : ds.examples) {
      const std::string s = symbols_of(t, e);
      INFO(name_of(t) << " " << s);
      REQUIRE(e.tgt.size() == 1);
      const int64_t want = t == ClassifyTask::dyck     ? dyck_checker(s, o.max_depth)
                           : t == ClassifyTask::parity ? parity_checker(s)
                                                       : majority_checker(s);
      CHECK(e.tgt[0] == want);
      CHECK(true_class(t, Ids(e.src.begin() + 1, e.src.end()), o.max_depth) == want);
      if (t == ClassifyTask::majority)
        CHECK(2 * std::count(s.begin(), s.end(), '1') != int64_t(s.size()));
      positives += e.tgt[0];
      ++lengths[static_cast<int64_t>(s.size())];
    }
    const double share = static_cast<double>(positives) / kSamples;
    std::printf("classify %-8s class 1: %.4f of %lld\n", name_of(t).data(), share,
                static_cast<long long>(kSamples));
    CHECK(std::abs(share - 0.5) < 0.03);
    // lengths: every one in range drawn (dyck: every even one, never an odd one)
    const int64_t step = t == ClassifyTask::dyck ? 2 : 1;
    CHECK(lengths.begin()->first == (t == ClassifyTask::dyck ? 2 : 1));
    CHECK(lengths.rbegin()->first == (t == ClassifyTask::dyck ? 24 : 20));
    CHECK(static_cast<int64_t>(lengths.size()) ==
          (lengths.rbegin()->first - lengths.begin()->first) / step + 1);
    for (const auto& [n, count] : lengths) CHECK(n % step == 0);
  }
}

TEST_CASE(
    "classify tasks: Dyck's negatives are near misses of four kinds, within the depth bound") {
  const int64_t depth = 3;
  const Dataset ds = make_classify_task(ClassifyTask::dyck, {2, 24, depth, false}, kSamples, 5);
  std::map<std::string, int64_t> kinds;
  int64_t negatives = 0, counting_fooled = 0, positives_at_bound = 0;
  for (const Example& e : ds.examples) {
    const std::string s = symbols_of(ClassifyTask::dyck, e, false);
    const Heights h = heights(s);
    INFO(s);
    // every string: heights within [-1, D + 1]; a positive within [0, D]
    CHECK(h.low >= -1);
    CHECK(h.high <= depth + 1);
    if (e.tgt[0] == 1) {
      CHECK(h.low == 0);
      CHECK(h.high <= depth);
      positives_at_bound += h.high == depth;
      continue;
    }
    ++negatives;
    const std::string kind = near_miss_kind(s, depth);
    ++kinds[kind];
    if (kind == "too deep") CHECK(reduces_to_empty(s));  // well nested, one level too deep
    if (kind == "too deep") CHECK(h.high == depth + 1);
    if (kind == "flip") CHECK(std::abs(h.final) == 2);  // one bracket turned around
    // equal counts and no prefix closing too much: counting alone cannot reject it
    counting_fooled += h.final == 0 && h.low == 0;
  }
  std::printf("dyck negatives: %lld; type swap %lld, flip %lld, early close %lld, too deep %lld\n",
              static_cast<long long>(negatives), static_cast<long long>(kinds["type swap"]),
              static_cast<long long>(kinds["flip"]), static_cast<long long>(kinds["early close"]),
              static_cast<long long>(kinds["too deep"]));
  REQUIRE(kinds.size() == 4);
  // lengths >= 2 (D + 1) = 8 (9 of the 12 even lengths) draw 4 kinds, shorter ones 3
  const double too_deep = 9.0 / 12 / 4, others = (1 - too_deep) / 3;
  CHECK(std::abs(kinds["too deep"] / double(negatives) - too_deep) < 0.03);
  for (const char* k : {"type swap", "flip", "early close"})
    CHECK(std::abs(kinds[k] / double(negatives) - others) < 0.03);
  CHECK(counting_fooled > negatives * 4 / 10);  // type swaps and too deep ones: about half
  CHECK(positives_at_bound > 0);                // the bound is reached, not only respected
}

TEST_CASE("classify tasks: the same seed gives the same examples, another seed others") {
  for (ClassifyTask t : {ClassifyTask::dyck, ClassifyTask::parity, ClassifyTask::majority}) {
    const ClassifyOptions o{2, 16, 2, true};
    const Dataset a = make_classify_task(t, o, 200, 3), b = make_classify_task(t, o, 200, 3),
                  c = make_classify_task(t, o, 200, 4);
    int same = 0, other = 0;
    for (int i = 0; i < 200; ++i) {
      same += a.examples[i].src == b.examples[i].src && a.examples[i].tgt == b.examples[i].tgt;
      other += a.examples[i].src == c.examples[i].src;
    }
    CHECK(same == 200);
    CHECK(other < 40);
    // one example is a function of the generator's state
    Generator g1(9), g2(9);
    g1.next_u64(), g2.next_u64();
    const Example x = make_classify_example(t, o, g1), y = make_classify_example(t, o, g2);
    CHECK(x.src == y.src);
    CHECK(x.tgt == y.tgt);
    CHECK(g1.position() == g2.position());
  }
  // without <cls> the src is the symbols alone
  Generator g(1);
  const Example e = make_parity({3, 3, 0, false}, g);
  CHECK(e.src.size() == 3);
  CHECK(std::find(e.src.begin(), e.src.end(), kClsId) == e.src.end());
}

TEST_CASE("classify tasks: options out of range are errors naming the task") {
  Generator g(1);
  CHECK_THROWS_WITH(make_dyck({3, 3, 2, true}, g),
                    Catch::Contains("dyck") && Catch::Contains("even"));
  CHECK_THROWS_WITH(make_dyck({1, 1, 2, true}, g), Catch::Contains("even"));
  CHECK_THROWS_WITH(make_dyck({2, 8, 0, true}, g), Catch::Contains("max_depth"));
  CHECK_THROWS_WITH(make_parity({5, 4, 0, true}, g),
                    Catch::Contains("parity") && Catch::Contains("min_len"));
  CHECK_THROWS_WITH(make_majority({0, 4, 0, true}, g), Catch::Contains("majority"));
  CHECK_THROWS_AS(make_classify_task(ClassifyTask::parity, {1, 4, 0, true}, -1, 0), Error);
  // a single even length, and the shortest balanced strings
  const Dataset two = make_classify_task(ClassifyTask::dyck, {1, 3, 1, true}, 200, 2);
  for (const Example& e : two.examples) {
    const std::string s = symbols_of(ClassifyTask::dyck, e);
    CHECK(s.size() == 2);
    CHECK(e.tgt[0] == dyck_checker(s, 1));
  }
}
