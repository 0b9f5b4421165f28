#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "data/batch.hpp"
#include "data/tasks.hpp"

using namespace qkv;
using namespace qkv::data;

TEST_CASE("tasks: copy, reverse and sort targets, lengths and symbols in range") {
  const TaskOptions o{7, 3, 9};
  const Vocab v = task_vocab(7);
  CHECK(v.size() == 11);
  CHECK(v.token(4) == "1");
  CHECK(v.token(10) == "7");
  for (SymbolTask k : {SymbolTask::copy, SymbolTask::reverse, SymbolTask::sort}) {
    const Dataset ds = make_task(k, o, 500, 42);
    REQUIRE(ds.size() == 500);
    std::map<int64_t, int> lengths;
    for (const Example& e : ds.examples) {
      ++lengths[static_cast<int64_t>(e.src.size())];
      for (int64_t id : e.src) {
        CHECK(id >= 4);
        CHECK(id < v.size());
      }
      Ids want = e.src;
      if (k == SymbolTask::reverse) std::reverse(want.begin(), want.end());
      if (k == SymbolTask::sort) std::sort(want.begin(), want.end());
      CHECK(e.tgt == want);
    }
    CHECK(lengths.begin()->first == 3);
    CHECK(lengths.rbegin()->first == 9);
    CHECK(lengths.size() == 7);  // every length drawn
  }
  // the three tasks differ on the same sources
  const Dataset r = make_task(SymbolTask::reverse, o, 50, 1);
  const Dataset s = make_task(SymbolTask::sort, o, 50, 1);
  int differ = 0;
  for (int i = 0; i < 50; ++i) differ += r.examples[i].tgt != s.examples[i].tgt;
  CHECK(differ > 30);
}

TEST_CASE("tasks: same seed -> same examples, another seed -> others") {
  const TaskOptions o{10, 1, 10};
  const Dataset a = make_task(SymbolTask::copy, o, 100, 5);
  const Dataset b = make_task(SymbolTask::copy, o, 100, 5);
  const Dataset c = make_task(SymbolTask::copy, o, 100, 6);
  int same = 0, other = 0;
  for (int i = 0; i < 100; ++i) {
    same += a.examples[i].src == b.examples[i].src;
    other += a.examples[i].src == c.examples[i].src;
  }
  CHECK(same == 100);
  CHECK(other < 20);
  CHECK_THROWS_AS(make_task(SymbolTask::copy, {10, 5, 4}, 1, 0), Error);
  CHECK_THROWS_AS(make_task(SymbolTask::copy, {0, 1, 4}, 1, 0), Error);
  CHECK_THROWS_AS(parse_task("shuffle"), Error);
}

TEST_CASE("tasks: the Annotated Transformer copy setup, exactly") {
  const Vocab v = annotated_copy_vocab();
  CHECK(v.size() == kAnnotatedV);  // V = 11
  CHECK(v.pad() == 0);
  CHECK(v.token(1) == "1");
  CHECK(v.token(10) == "10");
  const Dataset ds = make_annotated_copy(400, 3);
  std::map<int64_t, int> seen;
  for (const Example& e : ds.examples) {
    REQUIRE(e.src.size() == 10);
    CHECK(e.src[0] == 1);  // data[:, 0] = 1
    for (int64_t id : e.src) ++seen[id];
    CHECK(Ids(e.src.begin() + 1, e.src.end()) == e.tgt);
  }
  CHECK(seen.begin()->first == 1);
  CHECK(seen.rbegin()->first == 10);
  CHECK(seen.size() == 10);  // symbols 1..10, never 0
  // Batch(src, tgt, pad = 0): tgt_in = tgt[:, :-1], tgt_out = tgt[:, 1:], ntokens = 9 a row
  const Batch b = make_batch(ds, {0, 1, 2}, annotated_copy_framing());
  CHECK(b.src.shape() == Shape{3, 10});
  CHECK(b.tgt_in.shape() == Shape{3, 9});
  CHECK(b.tgt_out.shape() == Shape{3, 9});
  CHECK(b.tgt_tokens == 27);
  const auto src = to_vector<int64_t>(b.src), tin = to_vector<int64_t>(b.tgt_in),
             tout = to_vector<int64_t>(b.tgt_out);
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 9; ++j) {
      CHECK(tin[r * 9 + j] == src[r * 10 + j]);       // tgt = src, tgt[:, :-1]
      CHECK(tout[r * 9 + j] == src[r * 10 + j + 1]);  // tgt[:, 1:]
    }
  }
}
