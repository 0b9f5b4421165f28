#include "data/loader.hpp"

namespace qkv::data {

Loader::Loader(std::shared_ptr<const Dataset> data, Framing framing, LoaderOptions options,
               uint64_t seed)
    : data_(std::move(data)), framing_(framing), options_(options) {
  QKV_CHECK(data_ != nullptr, "Loader", "null dataset");
  QKV_CHECK(data_->size() > 0, "Loader", "dataset '", data_->name, "' is empty");
  QKV_CHECK(options_.prefetch >= 0, "Loader", "prefetch must be >= 0, got ", options_.prefetch);
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
  Generator gen;
  gen.set_state(s.rng_seed, s.rng_position);
  Plan plan = plan_batches(*data_, framing_, options_.batch, gen);
  QKV_CHECK(s.index < static_cast<int64_t>(plan.size()), "Loader::restore", "index ", s.index,
            " past the ", plan.size(), " batches of epoch ", s.epoch, " of '", data_->name,
            "' (state saved with other data or batch options?)");
  cursor_ = Cursor{s, gen, std::move(plan)};
}

Loader::Item Loader::produce() {
  Item it;
  it.batch = make_batch(*data_, cursor_.plan[static_cast<size_t>(cursor_.at.index)], framing_);
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
      can_push_.wait(lock, [&] {
        return stop_ || static_cast<int64_t>(queue_.size()) < options_.prefetch;
      });
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
