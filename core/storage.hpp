// Storage: one 64-byte aligned block of bytes, owned by the Tensors that share it.
//
// Blocks come from a caching allocator: a freed block goes back to a free list for its size
// class (powers of two from 64 bytes), so a training step that repeats the previous step's
// allocations takes nothing from the system after the first step.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace qkv {

class Storage {
 public:
  explicit Storage(size_t nbytes);  // contents uninitialised
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // A number no other Storage of this process has had: the allocator reuses addresses, so an
  // address does not tell two storages apart over time.
  uint64_t id() const { return id_; }
  // Incremented by every write to existing contents through Tensor (copy_, fill_, zero_), so a
  // copy made of the contents (the bf16 copies of core/precision.hpp) at one version is known
  // to be stale at another. Kernels that write a fresh output need not bump it: nothing can
  // hold a copy of contents not yet written.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  uint64_t id_;
  std::atomic<uint64_t> version_{0};
};

struct AllocatorStats {
  uint64_t system_allocs = 0;  // blocks taken from the system (cache misses)
  uint64_t cache_hits = 0;     // blocks reused from a free list
  uint64_t created_bytes = 0;  // bytes asked for by every Storage made so far (each tensor a
                               // kernel writes: a floor on the memory traffic of the work)
  size_t cached_bytes = 0;     // bytes held in free lists now
  size_t live_bytes = 0;       // bytes held by live Storage now
  size_t peak_live_bytes = 0;  // the most live_bytes has been (the peak tensor memory)
};
AllocatorStats allocator_stats();
// Returns every cached block to the system.
void allocator_release_cache();
// Restarts peak tracking: peak_live_bytes = live_bytes (to measure one piece of work).
void allocator_reset_peak();

}  // namespace qkv
