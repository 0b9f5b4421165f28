// Threads: one OpenMP pool for qkv's kernels and OpenBLAS alike.
//
// Policy: qkv links the OpenMP build of OpenBLAS. A BLAS call made inside a parallel region
// runs single-threaded in its calling thread, so no second set of threads ever competes for
// the cores; qkv's matmul uses that to give each thread its own band of the product
// (kernel::gemm_bands). set_num_threads sets both.
#pragma once
#include <cstdint>

namespace qkv {

void set_num_threads(int n);  // n <= 0: all cores
int get_num_threads();
bool in_parallel_region();

// Below this many elements an elementwise kernel stays on one thread: spawning costs more.
constexpr int64_t kParallelGrain = 32768;

// Runs fn(lo, hi) over [0, n) in contiguous chunks, in parallel when n * cost_per_item is
// large. Chunk boundaries depend only on n and the thread count; results must not depend on
// them (each index is handled by exactly one call).
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& fn);

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
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    if (lo < hi) fn(lo, hi);
  }
}
}  // namespace qkv
