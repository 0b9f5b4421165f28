#include <catch2/catch.hpp>

#include "data/batch.hpp"
#include "data/config.hpp"
#include "data/dates.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {
Dataset tiny() {
  Dataset ds;
  ds.name = "tiny";
  ds.examples = {{{5, 6, 7}, {8, 9}}, {{5}, {8, 9, 10, 11}}, {{4, 4, 4, 4, 4}, {}}};
  return ds;
}
}  // namespace

TEST_CASE("batch: padding to the longest, masks, shifted targets") {
  const Dataset ds = tiny();
  const Batch b = make_batch(ds, {0, 1, 2}, Framing{1, 2});
  REQUIRE(b.src.shape() == Shape{3, 5});
  REQUIRE(b.tgt_in.shape() == Shape{3, 5});  // longest target 4 + 1
  CHECK(b.src.dtype() == DType::i64);
  CHECK(b.src_mask.dtype() == DType::b8);
  CHECK(b.tgt_mask.shape() == Shape{3, 5});
  CHECK(to_vector<int64_t>(b.src) ==
        std::vector<int64_t>{5, 6, 7, 0, 0, 5, 0, 0, 0, 0, 4, 4, 4, 4, 4});
  CHECK(to_vector<uint8_t>(b.src_mask) ==
        std::vector<uint8_t>{1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  // <bos> y in, y <eos> out
  CHECK(to_vector<int64_t>(b.tgt_in) ==
        std::vector<int64_t>{1, 8, 9, 0, 0, 1, 8, 9, 10, 11, 1, 0, 0, 0, 0});
  CHECK(to_vector<int64_t>(b.tgt_out) ==
        std::vector<int64_t>{8, 9, 2, 0, 0, 8, 9, 10, 11, 2, 2, 0, 0, 0, 0});
  CHECK(to_vector<uint8_t>(b.tgt_mask) ==
        std::vector<uint8_t>{1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  CHECK(b.src_tokens == 9);
  CHECK(b.tgt_tokens == 3 + 5 + 1);
  CHECK(b.indices == std::vector<int64_t>{0, 1, 2});
  // row order follows the indices
  const Batch r = make_batch(ds, {1}, Framing{1, 2});
  CHECK(r.src.shape() == Shape{1, 1});
  CHECK(r.tgt_out.shape() == Shape{1, 5});
}

TEST_CASE("batch: misuse is a qkv::Error naming the dataset and example") {
  Dataset ds = tiny();
  CHECK_THROWS_WITH(make_batch(ds, {0, 3}, Framing{}),
                    Catch::Contains("index 3") && Catch::Contains("tiny"));
  CHECK_THROWS_AS(make_batch(ds, {}, Framing{}), Error);
  // no eos and an empty target: nothing to predict
  CHECK_THROWS_WITH(make_batch(ds, {2}, Framing{1, -1}), Catch::Contains("example 2"));
  ds.examples.push_back({{}, {4}});
  CHECK_THROWS_WITH(make_batch(ds, {3}, Framing{}), Catch::Contains("empty source"));
  ds.examples.push_back({{-4}, {4}});
  CHECK_THROWS_WITH(make_batch(ds, {4}, Framing{}), Catch::Contains("negative"));
}

namespace {
// Most sequences short, a tail of long ones (a skewed length distribution).
Dataset skewed(int64_t n, uint64_t seed) {
  Generator g(seed);
  Dataset ds;
  ds.name = "skewed";
  for (int64_t i = 0; i < n; ++i) {
    const bool longer = g.next_uniform() < 0.1;
    const int64_t L = longer ? 40 + g.next_int(60) : 2 + g.next_int(8);
    Example e;
    for (int64_t j = 0; j < L; ++j) e.src.push_back(4 + g.next_int(20));
    e.tgt = e.src;
    ds.examples.push_back(std::move(e));
  }
  return ds;
}

void check_plan_covers(const Plan& p, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const auto& b : p)
    for (int64_t i : b) ++seen[static_cast<size_t>(i)];
  for (int s : seen) CHECK(s == 1);
}
}  // namespace

TEST_CASE("plan: bucketing cuts the padding fraction on a skewed length distribution") {
  const Dataset ds = skewed(4000, 1);
  BatchOptions o;
  o.batch_size = 32;
  o.bucket = false;
  Generator g1(7), g2(7);
  const Plan plain = plan_batches(ds, Framing{}, o, g1);
  o.bucket = true;
  const Plan bucketed = plan_batches(ds, Framing{}, o, g2);
  check_plan_covers(plain, ds.size());
  check_plan_covers(bucketed, ds.size());
  const double without = padding_stats(ds, plain, Framing{}).fraction();
  const double with = padding_stats(ds, bucketed, Framing{}).fraction();
  WARN("skewed lengths (90% 2..9, 10% 40..99), batch 32: padding "
       << without << " without bucketing, " << with << " with");
  CHECK(without > 0.5);
  CHECK(with < without / 4);
  // bucketed batches still come in a shuffled order: lengths of consecutive batches are not sorted
  int rises = 0;
  for (size_t i = 1; i < bucketed.size(); ++i)
    rises += ds.examples[bucketed[i][0]].src.size() > ds.examples[bucketed[i - 1][0]].src.size();
  CHECK(rises > 10);
  CHECK(rises < static_cast<int>(bucketed.size()) - 10);
}

TEST_CASE("plan: max_tokens caps rows * max(S, T)") {
  const Dataset ds = skewed(2000, 2);
  BatchOptions o;
  o.batch_size = 1000;
  o.max_tokens = 400;
  Generator g(3);
  const Plan p = plan_batches(ds, Framing{}, o, g);
  check_plan_covers(p, ds.size());
  int64_t most = 0;
  for (const auto& b : p) {
    int64_t w = 0;
    for (int64_t i : b)
      w = std::max({w, static_cast<int64_t>(ds.examples[i].src.size()),
                    Framing{}.target_len(static_cast<int64_t>(ds.examples[i].tgt.size()))});
    CHECK(static_cast<int64_t>(b.size()) * w <= 400);
    most = std::max(most, static_cast<int64_t>(b.size()));
  }
  CHECK(most > 30);  // short examples pack many to a batch
  // one example longer than the cap gets a batch of its own rather than being dropped
  o.max_tokens = 20;
  Generator g2(3);
  const Plan q = plan_batches(ds, Framing{}, o, g2);
  check_plan_covers(q, ds.size());
  for (const auto& b : q)
    if (ds.examples[b[0]].src.size() > 20) CHECK(b.size() == 1);
}

TEST_CASE("plan: no shuffle keeps the dataset order, options are checked") {
  const Dataset ds = skewed(100, 3);
  BatchOptions o;
  o.batch_size = 10;
  o.shuffle = false;
  o.bucket = false;
  Generator g(0);
  const Plan p = plan_batches(ds, Framing{}, o, g);
  REQUIRE(p.size() == 10);
  CHECK(p[3][4] == 34);
  CHECK(g.position() == 0);  // draws nothing
  o.batch_size = 0;
  CHECK_THROWS_AS(plan_batches(ds, Framing{}, o, g), Error);
}

TEST_CASE("plan: padding fraction on the dates task with and without bucketing") {
  DataConfig c;
  c.task = qkv::data::TaskKind::tsv;
  c.path = testing::source_path("configs/data/dates.tsv");
  c.train_size = 0;  // all lines not in valid / test
  c.valid_size = 250;
  c.test_size = 250;
  for (const char* tok : {"char", "word"}) {
    c.tokenizer = qkv::parse_name<TokenizerKind>(tok, "tokenizer");
    const DataSplits d = load_data(c);
    BatchOptions o;
    o.batch_size = 64;
    o.bucket = false;
    Generator g1(1), g2(1);
    const double without =
        padding_stats(d.train, plan_batches(d.train, d.framing, o, g1), d.framing).fraction();
    o.bucket = true;
    const double with =
        padding_stats(d.train, plan_batches(d.train, d.framing, o, g2), d.framing).fraction();
    WARN("dates.tsv train (" << d.train.size() << " pairs, " << tok
                             << " tokens), batch 64: padding " << without << " without bucketing, "
                             << with << " with");
    CHECK(with < without / 2);
  }
}
