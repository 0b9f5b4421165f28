#include "serve/model_cache.hpp"

#include "core/error.hpp"
#include "serve/http.hpp"

namespace qkv::serve {

std::function<void(const std::string&)>& before_load() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

void ModelCache::check_name(const std::string& which) {
  if (which != "best" && which != "latest" && which.rfind("step-", 0) != 0)
    throw BadInput("checkpoint must be best, latest or step-N, got '" + which + "'");
}

std::shared_ptr<Model> ModelCache::get(const ServedRun& run, const std::string& which) {
  check_name(which);
  std::string name;
  try {
    name = resolve_checkpoint_name(run.dir.string(), which);
  } catch (const Error& e) {
    throw NotFound(run.name + ": no checkpoint " + which + " (yet)");
  }
  const std::string key = run.name + "/" + name;
  const std::shared_ptr<Slot> slot = slot_for(key);
  std::lock_guard<std::mutex> loading(slot->mu);  // this checkpoint only
  if (!slot->model) {
    try {
      if (before_load()) before_load()(key);
      slot->model = std::make_shared<Model>(run.dir.string(), name, precision_);
    } catch (...) {
      forget(key, slot);  // the next request tries again
      throw;
    }
  }
  return slot->model;
}

std::shared_ptr<ModelCache::Slot> ModelCache::slot_for(const std::string& key) {
  std::lock_guard<std::mutex> hold(mu_);  // held for the list only, never for a load
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->first == key) {
      lru_.splice(lru_.begin(), lru_, it);
      return it->second;
    }
  lru_.emplace_front(key, std::make_shared<Slot>());
  if (lru_.size() > capacity_) lru_.pop_back();
  return lru_.front().second;
}

void ModelCache::forget(const std::string& key, const std::shared_ptr<Slot>& slot) {
  std::lock_guard<std::mutex> hold(mu_);
  lru_.remove_if([&](const auto& e) { return e.first == key && e.second == slot; });
}

}  // namespace qkv::serve
