#include "bench/peaks.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/bench_util.hpp"
#include "core/bf16.hpp"
#include "core/onednn.hpp"
#include "core/tensor.hpp"

namespace qkv::bench {

// Best sgemm GFLOP/s on 1024^3 with this many threads: the roof for "% of peak". Both ways
// of using the threads are timed, OpenBLAS's own threaded call and qkv::matmul (one band per
// thread, core/matmul.cpp), and the better one is the roof, so qkv is never measured against
// a lower ceiling than it reaches itself.
double sgemm_peak_gflops() {
  const int n = 1024;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  const Tensor ta = full({n, n}, 1.0), tb = full({n, n}, 0.5);
  double best = 0;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = Clock::now();
    if (i % 2 == 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                  n, 0.0f, c.data(), n);
    else
      (void)matmul(ta, tb);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

// Best bf16 GEMM GFLOP/s on 2048^3 with this many threads: the roof of the bf16 steps' MFU.
// The GEMM the bf16 products run (oneDNN's, core/onednn.hpp), on operands already rounded, so
// the roof is the kernel's own rate without the rounding a step also pays.
double bf16_gemm_peak_gflops() {
  const int n = 2048;
  std::vector<bf16_t> a(size_t(n) * n, bf16_round(1.0f)), b(size_t(n) * n, bf16_round(0.5f));
  std::vector<float> c(size_t(n) * n);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    kernel::gemm_bf16(false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n, nullptr);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i > 0) best = std::max(best, 2.0 * n * n * n / s / 1e9);  // the first creates the kernel
  }
  return best;
}

}  // namespace qkv::bench
