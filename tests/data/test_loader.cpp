#include <catch2/catch.hpp>

#include <memory>
#include <set>

#include "data/loader.hpp"
#include "data/tasks.hpp"

using namespace qkv;
using namespace qkv::data;

namespace {
std::shared_ptr<const Dataset> copy_data(int64_t n = 300) {
  return std::make_shared<const Dataset>(make_task(SymbolTask::copy, {10, 1, 12}, n, 4));
}

LoaderOptions opts(int64_t prefetch, bool bucket = true) {
  LoaderOptions o;
  o.batch.batch_size = 16;
  o.batch.bucket = bucket;
  o.batch.bucket_pool = 4;
  o.prefetch = prefetch;
  return o;
}

bool same(const Batch& a, const Batch& b) {
  return a.indices == b.indices && to_vector<int64_t>(a.src) == to_vector<int64_t>(b.src) &&
         to_vector<int64_t>(a.tgt_in) == to_vector<int64_t>(b.tgt_in) &&
         to_vector<int64_t>(a.tgt_out) == to_vector<int64_t>(b.tgt_out) &&
         to_vector<uint8_t>(a.src_mask) == to_vector<uint8_t>(b.src_mask) &&
         to_vector<uint8_t>(a.tgt_mask) == to_vector<uint8_t>(b.tgt_mask);
}

std::vector<Batch> take(Loader& l, int n) {
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) out.push_back(l.next());
  return out;
}
}  // namespace

TEST_CASE("loader: each epoch visits every example once, in a new order") {
  const auto ds = copy_data();
  Loader l(ds, Framing{}, opts(0), 1);
  std::vector<std::vector<int64_t>> epoch_orders(3);
  while (l.state().epoch < 3) {
    const int64_t e = l.state().epoch;
    const Batch b = l.next();
    epoch_orders[static_cast<size_t>(e)].insert(epoch_orders[static_cast<size_t>(e)].end(),
                                                b.indices.begin(), b.indices.end());
  }
  for (const auto& order : epoch_orders) {
    CHECK(order.size() == 300);
    CHECK(std::set<int64_t>(order.begin(), order.end()).size() == 300);
  }
  CHECK(epoch_orders[0] != epoch_orders[1]);
  CHECK(epoch_orders[1] != epoch_orders[2]);
}

TEST_CASE("loader: same seed -> same batches in the same order, another seed -> others") {
  const auto ds = copy_data();
  Loader a(ds, Framing{}, opts(0), 7), b(ds, Framing{}, opts(0), 7), c(ds, Framing{}, opts(0), 8);
  const auto ba = take(a, 60), bb = take(b, 60), bc = take(c, 60);  // three epochs' worth
  int equal = 0, equal_other = 0;
  for (int i = 0; i < 60; ++i) equal += same(ba[i], bb[i]), equal_other += same(ba[i], bc[i]);
  CHECK(equal == 60);
  CHECK(equal_other < 5);
}

TEST_CASE("loader: save / restore position -> identical continuation, across epochs") {
  const auto ds = copy_data();
  for (int64_t prefetch : {0, 3}) {
    Loader ref(ds, Framing{}, opts(prefetch), 5);
    const auto all = take(ref, 70);  // > 3 epochs
    for (int cut : {0, 1, 13, 19, 20, 21, 44}) {
      Loader first(ds, Framing{}, opts(prefetch), 5);
      take(first, cut);
      const LoaderState saved = first.state();
      // a brand-new loader, as in a resumed run, built with another seed then restored
      Loader resumed(ds, Framing{}, opts(prefetch), 999);
      resumed.restore(saved);
      CHECK(resumed.state() == saved);
      int equal = 0;
      for (int i = cut; i < 70; ++i) equal += same(resumed.next(), all[static_cast<size_t>(i)]);
      CHECK(equal == 70 - cut);
    }
  }
  // the state is the position of the next batch: epoch rolls over after the last one
  Loader l(ds, Framing{}, opts(0), 5);
  const LoaderState s0 = l.state();
  CHECK(s0.epoch == 0);
  CHECK(s0.index == 0);
  CHECK(s0.rng_seed == 5);
  int n = 0;
  while (l.state().epoch == 0) l.next(), ++n;
  CHECK(l.state().index == 0);
  CHECK(l.state().rng_position > s0.rng_position);
  CHECK(n >= 300 / 16);
}

TEST_CASE("loader: a bad state is refused and leaves the loader where it was") {
  const auto ds = copy_data();
  Loader l(ds, Framing{}, opts(2), 3);
  take(l, 5);
  const LoaderState before = l.state();
  LoaderState bad = before;
  bad.index = 10000;
  CHECK_THROWS_WITH(l.restore(bad), Catch::Contains("index 10000"));
  CHECK(l.state() == before);
  Loader ref(ds, Framing{}, opts(0), 3);
  take(ref, 5);
  CHECK(same(l.next(), ref.next()));
}

TEST_CASE("loader: prefetch gives the same stream as synchronous loading") {
  const auto ds = copy_data(500);
  Loader sync(ds, Framing{}, opts(0, false), 11), pre(ds, Framing{}, opts(4, false), 11);
  int equal = 0;
  for (int i = 0; i < 100; ++i) {
    equal += same(sync.next(), pre.next());
    CHECK(sync.state() == pre.state());
  }
  CHECK(equal == 100);
}

TEST_CASE("loader: an error in the prefetch thread surfaces in next() with its message") {
  Dataset d = make_task(SymbolTask::copy, {10, 1, 5}, 40, 2);
  d.name = "broken";
  d.examples[23].src.clear();  // make_batch refuses an empty source
  const auto ds = std::make_shared<const Dataset>(std::move(d));
  LoaderOptions o = opts(2, false);
  o.batch.shuffle = false;
  o.batch.batch_size = 4;
  Loader l(ds, Framing{}, o, 0);
  for (int i = 0; i < 5; ++i) CHECK(l.next().size() == 4);  // batches 0..4 are fine
  CHECK_THROWS_WITH(l.next(), Catch::Contains("prefetch thread") && Catch::Contains("example 23") &&
                                  Catch::Contains("empty source"));
  CHECK_THROWS_WITH(l.next(), Catch::Contains("example 23"));  // and stays failed
  // synchronous loading reports the same error directly
  Loader s(ds, Framing{}, opts(0, false), 0);
  CHECK_THROWS_WITH(take(s, 40), Catch::Contains("example 23"));
}

// Epoch e's examples: the dataset's, each source with a symbol e + 4 appended (its own ids, and
// lengths that move the plan), as subword sampling gives.
EpochData marked_epochs(std::shared_ptr<const Dataset> ds) {
  return [ds](int64_t epoch) {
    auto out = std::make_shared<Dataset>(*ds);
    for (Example& e : out->examples) e.src.push_back(epoch + 4);
    return std::shared_ptr<const Dataset>(out);
  };
}

TEST_CASE("loader: epoch data gives each epoch its examples, and resumes into them") {
  const auto ds = copy_data();
  for (int64_t prefetch : {0, 3}) {
    LoaderOptions o = opts(prefetch);
    o.epoch_data = marked_epochs(ds);
    Loader ref(ds, Framing{}, o, 5);
    std::vector<Batch> all;
    std::vector<int64_t> epochs;
    for (int i = 0; i < 70; ++i) epochs.push_back(ref.state().epoch), all.push_back(ref.next());
    for (size_t i = 0; i < all.size(); ++i) {
      // every row of a batch of epoch e ends its source with e's mark
      const Batch& b = all[i];
      const auto src = to_vector<int64_t>(b.src);
      const auto mask = to_vector<uint8_t>(b.src_mask);
      const int64_t rows = b.src.size(0), cols = b.src.size(1);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t last = 0;
        for (int64_t c = 0; c < cols; ++c)
          if (mask[static_cast<size_t>(r * cols + c)])
            last = src[static_cast<size_t>(r * cols + c)];
        CHECK(last == epochs[i] + 4);
      }
    }
    CHECK(epochs.back() >= 3);
    Loader first(ds, Framing{}, o, 5);
    take(first, 47);  // into the third epoch
    Loader resumed(ds, Framing{}, o, 999);
    resumed.restore(first.state());
    int equal = 0;
    for (int i = 47; i < 70; ++i) equal += same(resumed.next(), all[static_cast<size_t>(i)]);
    CHECK(equal == 70 - 47);
  }
  LoaderOptions short_epochs = opts(0);
  short_epochs.epoch_data = [](int64_t) { return std::make_shared<const Dataset>(); };
  CHECK_THROWS_WITH(Loader(ds, Framing{}, short_epochs, 1),
                    Catch::Contains("epoch 0") && Catch::Contains("not 300"));
}

TEST_CASE("loader: misuse") {
  CHECK_THROWS_AS(Loader(std::make_shared<const Dataset>(), Framing{}, opts(0), 0), Error);
  CHECK_THROWS_AS(Loader(nullptr, Framing{}, opts(0), 0), Error);
  LoaderOptions o = opts(0);
  o.batch.batch_size = 0;
  CHECK_THROWS_AS(Loader(copy_data(), Framing{}, o, 0), Error);
}

// --- sharding for data-parallel training ---

TEST_CASE("loader: shards partition each global batch and know its global counts") {
  const auto ds = copy_data();
  const int64_t n = 3;
  Loader whole(ds, Framing{}, opts(0), 5);
  std::vector<std::unique_ptr<Loader>> shards;
  for (int64_t r = 0; r < n; ++r) {
    LoaderOptions o = opts(r == 1 ? 2 : 0);  // with and without prefetch alike
    o.shard_rank = r;
    o.shard_count = n;
    shards.push_back(std::make_unique<Loader>(ds, Framing{}, o, 5));
  }
  for (int step = 0; step < 45; ++step) {  // past the end of the first epoch (~19 batches)
    const Batch g = whole.next();
    std::multiset<int64_t> rows;
    int64_t tgt = 0, src = 0;
    for (int64_t r = 0; r < n; ++r) {
      const Batch b = shards[static_cast<size_t>(r)]->next();
      CHECK(b.indices == shard_indices(g.indices, r, n));
      rows.insert(b.indices.begin(), b.indices.end());
      tgt += b.tgt_tokens;
      src += b.src_tokens;
      CHECK(b.global_size == g.size());
      CHECK(b.global_tgt_tokens == g.tgt_tokens);
      CHECK(b.global_src_tokens == g.src_tokens);
      CHECK(shards[static_cast<size_t>(r)]->state() == whole.state());
    }
    CHECK(rows == std::multiset<int64_t>(g.indices.begin(), g.indices.end()));
    CHECK(tgt == g.tgt_tokens);
    CHECK(src == g.src_tokens);
  }
}

TEST_CASE("loader: a global batch with fewer rows than shards leaves a shard empty") {
  const auto ds = copy_data(5);
  LoaderOptions o = opts(0, false);
  o.batch.batch_size = 4;
  o.batch.shuffle = false;  // batches {0, 1, 2, 3} and {4}
  o.shard_rank = 2;
  o.shard_count = 3;
  Loader l(ds, Framing{}, o, 1);
  const Batch first = l.next();
  CHECK(first.indices == std::vector<int64_t>{2});
  CHECK(first.global_size == 4);
  const Batch second = l.next();
  CHECK(second.size() == 0);
  CHECK_FALSE(second.src.defined());
  CHECK(second.tgt_tokens == 0);
  CHECK(second.global_size == 1);
  CHECK(second.global_tgt_tokens ==
        Framing{}.target_len(static_cast<int64_t>(ds->examples[4].tgt.size())));
}

TEST_CASE("loader: shard_indices is strided, bad shards are refused") {
  CHECK(shard_indices({10, 11, 12, 13, 14}, 0, 2) == std::vector<int64_t>{10, 12, 14});
  CHECK(shard_indices({10, 11, 12, 13, 14}, 1, 2) == std::vector<int64_t>{11, 13});
  CHECK(shard_indices({10}, 1, 2).empty());
  CHECK(shard_indices({10, 11}, 0, 1) == std::vector<int64_t>{10, 11});
  CHECK_THROWS_AS(shard_indices({10}, 2, 2), Error);
  CHECK_THROWS_AS(shard_indices({10}, 0, 0), Error);
  LoaderOptions o = opts(0);
  o.shard_rank = 3;
  o.shard_count = 3;
  CHECK_THROWS_AS(Loader(copy_data(), Framing{}, o, 0), Error);
  o.shard_rank = -1;
  CHECK_THROWS_AS(Loader(copy_data(), Framing{}, o, 0), Error);
}
