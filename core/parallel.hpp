// Threads: one OpenMP pool for qkv's kernels and OpenBLAS alike.
//
// Policy: qkv links the OpenMP build of OpenBLAS. A BLAS call made inside a parallel region
// runs single-threaded in its calling thread, so no second set of threads ever competes for
// the cores; qkv's matmul uses that to give each thread its own band of the product
// (kernel::gemm_bands). set_num_threads sets both.
#pragma once
#include <atomic>
#include <cstdint>

namespace qkv {

void set_num_threads(int n);  // n <= 0: all cores
// The team size of the calling thread's own parallel regions only (OpenMP keeps it per
// thread), leaving BLAS's process-wide count alone: what a server's request thread sets while
// other requests run. OpenBLAS's OpenMP build reallocates per-thread buffers whenever its count
// changes, which two threads setting different counts at once would race on; inference calls
// BLAS single-threaded anyway (ThreadInvariantProducts below). n <= 0: all cores.
void set_thread_team(int n);
int get_num_threads();
bool in_parallel_region();

// Thread-invariant products. While one of these scopes is open on the calling thread, every
// matrix product (kernel::gemm_bands, kernel::gemm_bf16) splits its work into bands fixed by its
// shape alone and hands them out to however many threads there are: a product gives the same
// bits at any thread count, whatever BLAS or oneDNN kernels run (a kernel's result for a row can
// depend on where its call starts and how many rows it has). Inference opens one
// (nn::InferenceScope), so scoring and decoding give the same output at any --threads.
// Training does not: its products take one band per thread, which packs each operand once per
// thread, and are deterministic for a given thread count.
class ThreadInvariantProducts;
inline bool thread_invariant_products();  // whether a scope is open on the calling thread

// Below this many elements an elementwise kernel stays on one thread: spawning costs more.
constexpr int64_t kParallelGrain = 32768;

// Runs fn(lo, hi) over [0, n) in contiguous chunks, in parallel when n * cost_per_item is
// large. Chunk boundaries depend only on n and the thread count; results must not depend on
// them (each index is handled by exactly one call).
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& fn);

// Timers on the parallel regions, for `qkv bench --gemm-shapes`: how much of a step runs in
// parallel regions, how much of that each thread spends working (the rest is the fork and
// join, and waiting for the other threads), and so how much runs on one thread between them.
// Off by default: then a region pays one relaxed atomic load.
struct ParallelStats {
  int64_t regions = 0;
  double seconds = 0;        // wall time inside the regions, from fork to join
  double busy_seconds[2]{};  // threads 0 and 1: time inside fn (others are not recorded)
};
void parallel_stats_enable(bool on);  // also clears what was recorded
ParallelStats parallel_stats();

namespace detail {
extern std::atomic<bool> g_parallel_stats_on;
// The calling thread's ThreadInvariantProducts flag; parallel_for hands it to its workers.
inline thread_local bool t_invariant_products = false;
void parallel_stats_record(double seconds, const double* busy);
double wall_seconds();
}  // namespace detail

class ThreadInvariantProducts {
 public:
  ThreadInvariantProducts() : was_(detail::t_invariant_products) {
    detail::t_invariant_products = true;
  }
  ~ThreadInvariantProducts() { detail::t_invariant_products = was_; }
  ThreadInvariantProducts(const ThreadInvariantProducts&) = delete;
  ThreadInvariantProducts& operator=(const ThreadInvariantProducts&) = delete;

 private:
  bool was_;
};
inline bool thread_invariant_products() { return detail::t_invariant_products; }

}  // namespace qkv

#include <omp.h>
namespace qkv {
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& fn) {
  if (n <= 0) return;
  const int threads = omp_get_max_threads();
  if (threads <= 1 || n * cost_per_item < kParallelGrain || omp_in_parallel() || n == 1) {
    fn(int64_t{0}, n);
    return;
  }
  const bool timed = detail::g_parallel_stats_on.load(std::memory_order_relaxed);
  double busy[2] = {}, t0 = timed ? detail::wall_seconds() : 0;
  const bool invariant = detail::t_invariant_products;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    const double start = timed ? detail::wall_seconds() : 0;
    const bool was = detail::t_invariant_products;
    detail::t_invariant_products = invariant;  // products inside fn split as the caller's do
    if (lo < hi) fn(lo, hi);
    detail::t_invariant_products = was;
    if (timed && t < 2) busy[t] = detail::wall_seconds() - start;
  }
  if (timed) detail::parallel_stats_record(detail::wall_seconds() - t0, busy);
}
}  // namespace qkv
