// Per-shape timing of the GEMMs behind matmul and linear_forward, for
// `qkv bench --gemm-shapes`: which products a training step spends its GEMM time on, and at
// what rate each shape runs there, next to the machine's sgemm peak.
//
// Off by default: then a GEMM pays one relaxed atomic load. On, each top-level product is
// timed. Not timed: the tiles inside fused attention, and products called from inside a
// parallel region (parts of other ops); a batched matmul's products are timed together. The
// bf16 output layer's chunks inside the fused loss (core/linear_cross_entropy.cpp) are recorded
// as its one (N, V) product: their summed time over the threads that ran them.
// Shapes are as BLAS sees them, row-major: C (n, m) = op(A) (n, k) op(B) (k, m), where op is
// T when that operand is read transposed.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include "parallel.hpp"

namespace qkv {

struct GemmShapeStats {
  int64_t n = 0, m = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool bf16 = false;   // true: bfloat16 operands on oneDNN; false: float32 on OpenBLAS
  int64_t batch = 1;   // products per timed call (a batched matmul's matrices), 1 for linear layers
  int64_t calls = 0;   // products, summed over the calls
  double seconds = 0;  // summed over the calls
};

void gemm_stats_enable(bool on);  // also clears what was recorded
bool gemm_stats_enabled();
// The shapes recorded since gemm_stats_enable(true), largest total time first.
std::vector<GemmShapeStats> gemm_stats();

namespace detail {
// Called by matmul, linear_forward and the fused loss: `calls` products of one shape (a batched
// matmul's matrices), timed together. Calls with different numbers of products are kept apart.
void gemm_stats_record(int64_t n, int64_t m, int64_t k, bool ta, bool tb, double seconds,
                       int64_t calls, bool bf16 = false);

// Runs `products` (`calls` products of one shape) and, with the GEMM timers on, records its
// time. Products run from inside a parallel region are parts of another op and are not timed.
template <class F>
void timed_products(int64_t n, int64_t m, int64_t k, bool ta, bool tb, int64_t calls, F&& products,
                    bool bf16 = false) {
  if (!gemm_stats_enabled() || in_parallel_region()) return products();
  const auto t0 = std::chrono::steady_clock::now();
  products();
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  gemm_stats_record(n, m, k, ta, tb, dt.count(), calls, bf16);
}
}  // namespace detail

}  // namespace qkv
