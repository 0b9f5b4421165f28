// Loader: an endless, deterministic stream of batches over a dataset, epoch after epoch, with
// a resumable position and an optional background prefetch thread.
//
// Epoch e's plan (plan_batches) is drawn from one Generator(seed) that runs on from epoch to
// epoch, so the same seed gives the same batches in the same order. LoaderState is the
// position of the NEXT batch next() returns: batch `index` of epoch `epoch`, where the
// generator stood at (rng_seed, rng_position) just before drawing that epoch's plan. restore()
// redraws the plan from there, so a resumed run sees exactly the batches it would have seen.
//
// Sharding (data-parallel training): with shard_count = N > 1 every process plans the SAME
// global batches from the same seed and next() returns only shard_rank's rows of each
// (shard_indices), with the global batch's size and token counts in Batch::global_*. The
// state is the global position, identical on every shard. A global batch with fewer rows
// than shards leaves some shards empty: next() then returns a Batch with no rows (undefined
// tensors, size() == 0) but the global counts set.
//
// With prefetch > 0 a thread builds up to `prefetch` batches ahead into a bounded queue while
// the model trains; the results and state() are the same as without it. An exception in the
// thread is rethrown by next() as qkv::Error("Loader: ...: <its message>").
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "data/batch.hpp"

namespace qkv::data {

struct LoaderState {
  int64_t epoch = 0;
  int64_t index = 0;      // batch within the epoch
  uint64_t rng_seed = 0;  // Generator state before the epoch's plan was drawn
  uint64_t rng_position = 0;
  bool operator==(const LoaderState&) const = default;
};

// The examples of epoch e when they change from epoch to epoch (subword sampling): the loader's
// dataset's examples, same count and order, with other token ids. Called for each epoch's plan
// (on the prefetch thread when there is one) and on restore, so it must depend on e alone.
using EpochData = std::function<std::shared_ptr<const Dataset>(int64_t epoch)>;

struct LoaderOptions {
  BatchOptions batch;
  EpochData epoch_data;     // empty: every epoch is the dataset itself
  int64_t prefetch = 0;     // batches built ahead on a background thread (0 = none, synchronous)
  int64_t shard_rank = 0;   // this process's shard, in [0, shard_count)
  int64_t shard_count = 1;  // 1 = unsharded
};

// Rows rank, rank + count, rank + 2 count, ... of a global batch: strided rather than
// contiguous because a planned batch is sorted by length, so every shard gets a similar mix
// of lengths (and similar work). Empty when the batch has <= rank rows.
std::vector<int64_t> shard_indices(const std::vector<int64_t>& batch, int64_t rank, int64_t count);

// What the trainer draws batches from: Loader (examples) or LmLoader (data/lm.hpp, windows
// of a token stream). state() is the position of the next batch; restore() returns to one.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch next() = 0;
  virtual LoaderState state() const = 0;
  virtual void restore(const LoaderState& s) = 0;
};

class Loader : public BatchSource {
 public:
  // The dataset is shared, not copied, and must not change while the loader lives.
  Loader(std::shared_ptr<const Dataset> data, Framing framing, LoaderOptions options,
         uint64_t seed);
  ~Loader() override;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  Batch next() override;
  LoaderState state() const override { return consumed_; }
  void restore(
      const LoaderState& s) override;  // checked against the dataset: index must be in the epoch

  const Dataset& dataset() const { return *data_; }
  const Framing& framing() const { return framing_; }

 private:
  // The producer side: a plain cursor over epochs, run on the caller's thread or the prefetch one.
  struct Cursor {
    LoaderState at;                       // next batch to build
    Generator gen;                        // positioned after at.epoch's plan
    Plan plan;                            // at.epoch's plan
    std::shared_ptr<const Dataset> data;  // at.epoch's examples
  };
  struct Item {
    Batch batch;
    LoaderState after;
    std::string error;  // non-empty: the producer failed
  };

  void seek(const LoaderState& s);  // cursor_ to s (redraws the plan)
  Item produce();                   // builds cursor_'s batch and advances it
  void start_thread();
  void stop_thread();
  void run();

  std::shared_ptr<const Dataset> data_;
  Framing framing_;
  LoaderOptions options_;
  Cursor cursor_;
  LoaderState consumed_;

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable can_push_, can_pop_;
  std::deque<Item> queue_;
  bool stop_ = false;
};

}  // namespace qkv::data
