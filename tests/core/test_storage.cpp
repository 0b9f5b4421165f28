// The caching allocator: a repeated sequence of ops takes nothing new from the system.
#include "core/storage.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

// One "training step" worth of tensor traffic: temporaries of many sizes, views, copies,
// reductions, a matmul, random draws; every result dropped at the end.
double step(Generator& g) {
  const Tensor x = randn({64, 96}, g);
  const Tensor w = randn({96, 48}, g);
  const Tensor h = gelu(add(matmul(x, w), 0.1));  // (64, 48)
  const Tensor p = softmax(h.view({8, 8, 48}).transpose(1, 2), -1);
  const Tensor s = sum(mul(p, p), {0, 2}, true);
  const Tensor c = concat({h.t().contiguous(), h.t()}, 1);
  const Tensor idx = randint({32}, 0, 64, g);
  const Tensor e = index_select(x, 0, idx);
  const Tensor big = randn({100000}, g);  // the parallel paths
  return sum(s).item() + sum(c).item() + mean(e).item() + var(big).item() +
         sum(where(gt(big, 0.0), big, zeros({1}))).item();
}

}  // namespace

TEST_CASE("after a warm-up step, repeating it makes no new system allocations") {
  Generator g(3);
  const AllocatorStats s0 = allocator_stats();
  (void)step(g);  // warm-up: fills the free lists
  const AllocatorStats s1 = allocator_stats();
  CHECK(s1.system_allocs > s0.system_allocs);
  CHECK(s1.live_bytes == s0.live_bytes);  // everything from the step was freed
  for (int i = 0; i < 3; ++i) (void)step(g);
  const AllocatorStats s2 = allocator_stats();
  CHECK(s2.system_allocs == s1.system_allocs);
  CHECK(s2.cache_hits > s1.cache_hits);
  CHECK(s2.live_bytes == s1.live_bytes);
}

TEST_CASE("allocator bookkeeping: live, cached, released") {
  const AllocatorStats s0 = allocator_stats();
  {
    const Tensor t = empty({1000});  // 4000 bytes -> the 4096-byte class
    CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
    const AllocatorStats s1 = allocator_stats();
    CHECK(s1.live_bytes == s0.live_bytes + 4096);
    CHECK(s1.created_bytes == s0.created_bytes + 4000);  // the bytes asked for, not the class
    const Tensor v = t.view({10, 100}).t();              // views allocate nothing
    CHECK(allocator_stats().live_bytes == s1.live_bytes);
    CHECK(allocator_stats().created_bytes == s1.created_bytes);
  }
  const AllocatorStats s2 = allocator_stats();
  CHECK(s2.live_bytes == s0.live_bytes);
  CHECK(s2.cached_bytes >= 4096);
  // the same size class is served from the cache
  {
    const Tensor t = empty({1024});
    CHECK(allocator_stats().cache_hits == s2.cache_hits + 1);
    CHECK(allocator_stats().system_allocs == s2.system_allocs);
  }
  allocator_release_cache();
  CHECK(allocator_stats().cached_bytes == 0);
  {
    const Tensor t = zeros({1024});
    CHECK(allocator_stats().system_allocs == s2.system_allocs + 1);
    CHECK(max(abs(t)).item() == 0);
  }
}
