#include "data/loader.hpp"

namespace qkv::data {

Loader::Loader(std::shared_ptr<const Dataset> data, Framing framing, LoaderOptions options,
               uint64_t seed)
    : data_(std::move(data)), framing_(framing), options_(options) {
  QKV_CHECK(data_ != nullptr, "Loader", "null dataset");
  QKV_CHECK(data_->size() > 0, "Loader", "dataset '", data_->name, "' is empty");
  QKV_CHECK(options_.prefetch >= 0, "Loader", "prefetch must be >= 0, got ", options_.prefetch);
  QKV_CHECK(options_.shard_count >= 1 && options_.shard_rank >= 0 &&
                options_.shard_rank < options_.shard_count,
            "Loader", "shard ", options_.shard_rank, " of ", options_.shard_count,
            ": need 0 <= shard_rank < shard_count");
  LoaderState s;
  s.rng_seed = seed;
  seek(s);  // checks the batch options through plan_batches
  consumed_ = cursor_.at;
  start_thread();
}

Loader::~Loader() { stop_thread(); }

void Loader::seek(const LoaderState& s) {
  QKV_CHECK(s.epoch >= 0 && s.index >= 0, "Loader::restore", "negative epoch ", s.epoch,
            " or index ", s.index);
  std::shared_ptr<const Dataset> data = options_.epoch_data ? options_.epoch_data(s.epoch) : data_;
  QKV_CHECK(data && data->size() == data_->size(), "Loader", "epoch ", s.epoch, " of '",
            data_->name, "' has ", data ? data->size() : 0, " examples, not ", data_->size());
  Generator gen;
  gen.set_state(s.rng_seed, s.rng_position);
  Plan plan = plan_batches(*data, framing_, options_.batch, gen);
  QKV_CHECK(s.index < static_cast<int64_t>(plan.size()), "Loader::restore", "index ", s.index,
            " past the ", plan.size(), " batches of epoch ", s.epoch, " of '", data_->name,
            "' (state saved with other data or batch options?)");
  cursor_ = Cursor{s, gen, std::move(plan), std::move(data)};
}

std::vector<int64_t> shard_indices(const std::vector<int64_t>& batch, int64_t rank, int64_t count) {
  QKV_CHECK(count >= 1 && rank >= 0 && rank < count, "shard_indices", "shard ", rank, " of ", count,
            ": need 0 <= rank < count");
  std::vector<int64_t> out;
  for (size_t i = static_cast<size_t>(rank); i < batch.size(); i += static_cast<size_t>(count))
    out.push_back(batch[i]);
  return out;
}

Loader::Item Loader::produce() {
  Item it;
  const std::vector<int64_t>& global = cursor_.plan[static_cast<size_t>(cursor_.at.index)];
  const std::shared_ptr<const Dataset> epoch_data = cursor_.data;  // seek() below replaces it
  const Dataset& data = *epoch_data;
  if (options_.shard_count == 1) {
    it.batch = make_batch(data, global, framing_);
  } else {
    const std::vector<int64_t> mine =
        shard_indices(global, options_.shard_rank, options_.shard_count);
    if (!mine.empty()) it.batch = make_batch(data, mine, framing_);
    // Every shard knows the global counts from the plan alone, without communicating.
    it.batch.global_size = static_cast<int64_t>(global.size());
    it.batch.global_src_tokens = it.batch.global_tgt_tokens = 0;
    for (int64_t i : global) {
      QKV_CHECK(i >= 0 && i < data.size(), "Loader", "index ", i, " out of range for '", data.name,
                "'");
      const Example& e = data.examples[static_cast<size_t>(i)];
      it.batch.global_src_tokens += static_cast<int64_t>(e.src.size());
      it.batch.global_tgt_tokens += framing_.target_len(static_cast<int64_t>(e.tgt.size()));
    }
  }
  if (++cursor_.at.index == static_cast<int64_t>(cursor_.plan.size())) {
    LoaderState s;
    s.epoch = cursor_.at.epoch + 1;
    s.rng_seed = cursor_.gen.seed();
    s.rng_position = cursor_.gen.position();
    seek(s);
  }
  it.after = cursor_.at;
  return it;
}

Batch Loader::next() {
  if (options_.prefetch == 0) {
    Item it = produce();
    consumed_ = it.after;
    return std::move(it.batch);
  }
  std::unique_lock<std::mutex> lock(mu_);
  can_pop_.wait(lock, [&] { return !queue_.empty(); });
  Item& front = queue_.front();
  // A failure stays at the head of the queue: every later next() reports it again.
  if (!front.error.empty())
    throw Error(cat("Loader: prefetch thread failed on '", data_->name, "': ", front.error));
  Item it = std::move(front);
  queue_.pop_front();
  lock.unlock();
  can_push_.notify_one();
  consumed_ = it.after;
  return std::move(it.batch);
}

void Loader::restore(const LoaderState& s) {
  stop_thread();
  try {
    seek(s);
  } catch (...) {
    seek(consumed_);  // a bad state leaves the loader where it was
    start_thread();
    throw;
  }
  consumed_ = cursor_.at;
  start_thread();
}

void Loader::start_thread() {
  if (options_.prefetch == 0) return;
  stop_ = false;
  queue_.clear();
  thread_ = std::thread([this] { run(); });
}

void Loader::stop_thread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  can_push_.notify_all();
  thread_.join();
  queue_.clear();
}

void Loader::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      can_push_.wait(
          lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < options_.prefetch; });
      if (stop_) return;
    }
    Item it;
    try {
      it = produce();  // outside the lock: this is the work that overlaps training
    } catch (const std::exception& e) {
      it.error = e.what();
      if (it.error.empty()) it.error = "unknown error";
    } catch (...) {
      it.error = "non-standard exception";
    }
    const bool failed = !it.error.empty();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(it));
    }
    can_pop_.notify_one();
    if (failed) return;
  }
}

}  // namespace qkv::data
