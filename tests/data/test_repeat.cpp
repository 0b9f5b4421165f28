// The repeat task (data/tasks/repeat.cpp): episodes of a repeated segment of distinct symbols
// whose period varies, seeded streams, and one clear error per bad key.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "data/config.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {

// 200 training and 50 validation episodes of 24 tokens, periods 3 to 9 over 20 symbols.
DataConfig repeat_config() {
  DataConfig c;
  c.task = TaskKind::repeat, c.seed = 7, c.vocab_size = 20, c.min_len = 3, c.max_len = 9;
  c.block_size = 24, c.train_size = 200, c.valid_size = 50;
  return c;
}

// The smallest p with e[i] == e[i - p] for every i >= p.
int64_t period_of(const Ids& e) {
  const auto n = static_cast<int64_t>(e.size());
  for (int64_t p = 1; p < n; ++p) {
    bool ok = true;
    for (int64_t i = p; i < n && ok; ++i)
      ok = e[static_cast<size_t>(i)] == e[static_cast<size_t>(i - p)];
    if (ok) return p;
  }
  return n;
}

}  // namespace

TEST_CASE("repeat: each episode repeats a segment of distinct symbols, its period varies") {
  const DataConfig c = repeat_config();
  const DataSplits d = load_data(c);
  REQUIRE(d.lm_train.size() == 200u * 24);
  REQUIRE(d.lm_valid.size() == 50u * 24);
  CHECK(d.tgt_vocab.size() == 20);
  CHECK(d.tgt_vocab.token(0) == "a");
  CHECK(d.tgt_vocab.token(19) == "t");
  CHECK(d.src_vocab == d.tgt_vocab);
  std::set<int64_t> periods;
  for (size_t at = 0; at < d.lm_train.size(); at += 24) {
    const Ids e(d.lm_train.begin() + static_cast<std::ptrdiff_t>(at),
                d.lm_train.begin() + static_cast<std::ptrdiff_t>(at + 24));
    const int64_t p = period_of(e);
    CHECK((p >= 3 && p <= 9));
    const std::set<int64_t> segment(e.begin(), e.begin() + p);
    CHECK(static_cast<int64_t>(segment.size()) == p);  // distinct: the successor is unique
    for (int64_t id : e) CHECK((id >= 0 && id < 20));
    periods.insert(p);
  }
  CHECK(periods.size() == 7u);  // every period of [3, 9] occurs: no fixed offset predicts
}

TEST_CASE("repeat: same seed -> same streams, train and valid differ, another seed differs") {
  DataConfig c = repeat_config();
  const DataSplits a = load_data(c), b = load_data(c);
  CHECK(a.lm_train == b.lm_train);
  CHECK(a.lm_valid == b.lm_valid);
  const Ids train_head(a.lm_train.begin(), a.lm_train.begin() + 50 * 24);
  CHECK(train_head != a.lm_valid);
  c.seed = 8;
  CHECK(load_data(c).lm_train != a.lm_train);
}

TEST_CASE("repeat: a bad key is one error naming it") {
  const auto fails = [](void (*edit)(DataConfig&), const std::string& key) {
    DataConfig c = repeat_config();
    edit(c);
    CHECK_THROWS_WITH(load_data(c), Catch::StartsWith("data." + key + ":"));
  };
  fails([](DataConfig& c) { c.vocab_size = 63; }, "vocab_size");
  fails([](DataConfig& c) { c.vocab_size = 1, c.min_len = c.max_len = 1; }, "vocab_size");
  fails([](DataConfig& c) { c.max_len = 21; }, "max_len");  // more than 20 distinct symbols
  fails([](DataConfig& c) { c.max_len = 13; }, "max_len");  // 2 x 13 > block_size 24
  fails([](DataConfig& c) { c.train_size = 1; }, "train_size");
  fails([](DataConfig& c) { c.valid_size = 1; }, "valid_size");
}
