// The [data] tasks dyck, parity and majority (data/tasks/classify.cpp): each split loaded from
// the [data] keys, every example checked against its task's definition written here from the
// symbols' text, the framing (<cls> first, a class id alone as the target, nothing added to
// it), the vocabularies, the lengths, determinism, and the key errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.hpp"
#include "data/classify_tasks.hpp"
#include "data/config.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {

// The definitions of data/classify_tasks.hpp, on the text of the symbols.
int64_t dyck_class(const std::string& s, int64_t depth) {
  std::string open;
  for (const char c : s) {
    if (c == '(' || c == '[') {
      open.push_back(c);
      if (static_cast<int64_t>(open.size()) > depth) return 0;
    } else {
      if (open.empty() || open.back() != (c == ')' ? '(' : '[')) return 0;
      open.pop_back();
    }
  }
  return open.empty() ? 1 : 0;
}
int64_t ones(const std::string& s) { return std::count(s.begin(), s.end(), '1'); }
int64_t expected_class(TaskKind t, const std::string& s, int64_t depth) {
  if (t == TaskKind::dyck) return dyck_class(s, depth);
  if (t == TaskKind::parity) return ones(s) % 2;
  return 2 * ones(s) > static_cast<int64_t>(s.size()) ? 1 : 0;
}

DataConfig small(TaskKind t) {
  DataConfig c;
  c.task = t;
  c.seed = 7;
  c.min_len = 2;
  c.max_len = 14;
  c.max_depth = 3;
  c.train_size = 400;
  c.valid_size = 100;
  c.test_size = 100;
  return c;
}

}  // namespace

TEST_CASE("classify tasks: every example of every split is its definition's class") {
  for (const TaskKind t : {TaskKind::dyck, TaskKind::parity, TaskKind::majority}) {
    const DataConfig c = small(t);
    const DataSplits d = load_data(c);
    INFO(name_of(t));
    CHECK(d.src_vocab.token(kClsId) == kCls);
    CHECK(d.tgt_vocab.size() == 2);
    CHECK(d.framing.eos == -1);  // nothing added to the class
    for (const Dataset* ds : {&d.train, &d.valid, &d.test}) {
      CHECK(ds->name.find(std::string(name_of(t))) != std::string::npos);
      int64_t per_class[2] = {0, 0};
      for (const Example& e : ds->examples) {
        REQUIRE(e.src.size() >= 2);
        REQUIRE(e.src[0] == kClsId);  // <cls> first, whatever model.pool reads
        REQUIRE(e.tgt.size() == 1);
        std::string s;
        for (size_t i = 1; i < e.src.size(); ++i) s += d.src_vocab.token(e.src[i]);
        const auto n = static_cast<int64_t>(s.size());
        CHECK(n >= c.min_len);
        CHECK(n <= c.max_len);
        if (t == TaskKind::dyck) CHECK(n % 2 == 0);
        if (t == TaskKind::majority) CHECK(2 * ones(s) != n);  // never a tie
        INFO(s);
        CHECK(e.tgt[0] == expected_class(t, s, c.max_depth));
        ++per_class[e.tgt[0]];
      }
      // both classes, near half each (each drawn with probability 1/2)
      CHECK(per_class[0] > ds->size() / 4);
      CHECK(per_class[1] > ds->size() / 4);
    }
    // A batch: tgt_out holds the class (a label 0 is a real class, not padding), tgt_in one
    // placeholder position the classifier does not read.
    const Batch b = make_batch(d.valid, {0, 1, 2}, d.framing);
    CHECK(b.tgt_out.shape() == Shape{3, 1});
    for (int64_t r = 0; r < 3; ++r)
      CHECK(b.tgt_out.data<int64_t>()[r] == d.valid.examples[static_cast<size_t>(r)].tgt[0]);
    CHECK(b.tgt_tokens == 3);
    // the same keys give the same examples; the splits are different draws
    const auto pairs = [](const Dataset& ds) {
      std::vector<std::pair<Ids, Ids>> out;
      for (const Example& e : ds.examples) out.emplace_back(e.src, e.tgt);
      return out;
    };
    CHECK(pairs(load_data(c).test) == pairs(d.test));
    CHECK(pairs(d.valid) != pairs(d.test));
  }
}

TEST_CASE("classify tasks: data.max_depth bounds dyck's balanced strings") {
  DataConfig c = small(TaskKind::dyck);
  c.max_depth = 1;
  c.max_len = 10;
  for (const Example& e : load_data(c).train.examples) {
    if (e.tgt[0] != 1) continue;
    int64_t open = 0;
    for (size_t i = 1; i < e.src.size(); ++i) {
      open += e.src[i] == 5 || e.src[i] == 7 ? 1 : -1;  // "(" 5, "[" 7
      CHECK(open <= 1);
    }
  }
}

TEST_CASE("classify tasks: out-of-range keys name the key") {
  DataConfig c = small(TaskKind::dyck);
  c.max_depth = 0;
  CHECK_THROWS_WITH(load_data(c), Catch::StartsWith("data.max_depth: "));
  c = small(TaskKind::dyck);
  c.min_len = c.max_len = 3;  // no even length
  CHECK_THROWS_WITH(load_data(c), Catch::StartsWith("data.max_len: ") && Catch::Contains("even"));
  c = small(TaskKind::parity);
  c.min_len = 0;
  CHECK_THROWS_WITH(load_data(c), Catch::StartsWith("data.min_len: "));
}
