// Storage: one 64-byte aligned block of bytes, owned by the Tensors that share it.
//
// Blocks come from a caching allocator: a freed block goes back to a free list for its size
// class (powers of two from 64 bytes), so a training step that repeats the previous step's
// allocations takes nothing from the system after the first step.
#pragma once
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

 private:
  void* data_;
  size_t nbytes_;
};

struct AllocatorStats {
  uint64_t system_allocs = 0;  // blocks taken from the system (cache misses)
  uint64_t cache_hits = 0;     // blocks reused from a free list
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
