#include "storage.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace qkv {
namespace {

constexpr size_t kAlign = 64;
constexpr int kClasses = 48;  // 64 B << 47 is far beyond any machine

// Size class c holds blocks of 64 << c bytes.
int size_class(size_t nbytes) {
  int c = 0;
  while ((kAlign << c) < nbytes) ++c;
  return c;
}

struct Cache {
  std::mutex mu;
  std::vector<void*> free_lists[kClasses];
  AllocatorStats stats;
};

// Leaked on purpose: Storage may be freed by static destructors after main returns.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

}  // namespace

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  const int c = size_class(nbytes);
  Cache& k = cache();
  {
    std::lock_guard<std::mutex> lock(k.mu);
    k.stats.live_bytes += kAlign << c;
    k.stats.created_bytes += nbytes;
    k.stats.peak_live_bytes = std::max(k.stats.peak_live_bytes, k.stats.live_bytes);
    if (!k.free_lists[c].empty()) {
      data_ = k.free_lists[c].back();
      k.free_lists[c].pop_back();
      k.stats.cached_bytes -= kAlign << c;
      ++k.stats.cache_hits;
      return;
    }
    ++k.stats.system_allocs;
  }
  data_ = std::aligned_alloc(kAlign, kAlign << c);
  if (!data_) throw std::bad_alloc();
}

Storage::~Storage() {
  const int c = size_class(nbytes_);
  Cache& k = cache();
  std::lock_guard<std::mutex> lock(k.mu);
  k.free_lists[c].push_back(data_);
  k.stats.cached_bytes += kAlign << c;
  k.stats.live_bytes -= kAlign << c;
}

AllocatorStats allocator_stats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}

void allocator_reset_peak() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().stats.peak_live_bytes = cache().stats.live_bytes;
}

void allocator_release_cache() {
  Cache& k = cache();
  std::lock_guard<std::mutex> lock(k.mu);
  for (auto& list : k.free_lists) {
    for (void* p : list) std::free(p);
    list.clear();
  }
  k.stats.cached_bytes = 0;
}

}  // namespace qkv
