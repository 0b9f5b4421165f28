// The checkpoints `qkv serve` has loaded, by (run, checkpoint folder): at most `capacity`, the
// least recently used dropped first (a request still using one keeps it alive). A checkpoint is
// read once: requests for one being loaded wait for that load alone; every other checkpoint
// answers meanwhile.
#pragma once
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/precision.hpp"
#include "serve/model.hpp"
#include "serve/run_files.hpp"

namespace qkv::serve {

class ModelCache {
 public:
  ModelCache(size_t capacity, std::optional<Precision> precision)
      : capacity_(capacity), precision_(precision) {}

  // The model of run's checkpoint `which` (best, latest or step-N), loaded on first use;
  // BadInput for another name, NotFound (serve/http.hpp) when the run has no such checkpoint.
  std::shared_ptr<Model> get(const ServedRun& run, const std::string& which);
  // BadInput unless which is best, latest or step-N: a name is checked before a request waits.
  static void check_name(const std::string& which);

 private:
  struct Slot {
    std::mutex mu;  // held while the checkpoint loads
    std::shared_ptr<Model> model;
  };

  // The key's slot, made (and the least recently used dropped past capacity) when new.
  std::shared_ptr<Slot> slot_for(const std::string& key);
  // Drops the key's slot if it is still `slot` (its load failed).
  void forget(const std::string& key, const std::shared_ptr<Slot>& slot);

  size_t capacity_;
  std::optional<Precision> precision_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<Slot>>> lru_;
};

// Called with "RUN/step-N" before each checkpoint is loaded (testing::set_before_load).
std::function<void(const std::string&)>& before_load();

}  // namespace qkv::serve
