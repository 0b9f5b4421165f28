// bench_matmul: square float32 matmul GFLOP/s through qkv::matmul next to raw cblas_sgemm on
// the same buffers, to show what the Tensor layer costs (allocation of the output, checks,
// dispatch). Usage: bench_matmul [threads=2] [min_seconds_per_size=0.5]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Median of repeated timings of fn, after warm-up runs. Repeats until min_seconds have been
// spent (at least 5 timings), so small sizes get many samples.
template <class F>
double median_seconds(F&& fn, double min_seconds) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> t;
  const auto start = Clock::now();
  while (t.size() < 5 ||
         std::chrono::duration<double>(Clock::now() - start).count() < min_seconds) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (t.size() >= 20000) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double min_seconds = argc > 2 ? std::atof(argv[2]) : 0.5;
  qkv::set_num_threads(threads);
  std::printf("matmul float32, %d threads (OpenBLAS %s, parallel=%d), median of timings\n\n",
              qkv::get_num_threads(), openblas_get_config(), openblas_get_parallel());
  std::printf("| n    | qkv::matmul GFLOP/s | cblas_sgemm GFLOP/s | ratio |\n");
  std::printf("|------|---------------------|---------------------|-------|\n");
  qkv::Generator g(0);
  float sink = 0;
  for (int64_t n : {64, 256, 1024}) {
    const qkv::Tensor a = qkv::randn({n, n}, g), b = qkv::randn({n, n}, g);
    qkv::Tensor c_raw = qkv::empty({n, n});
    const double flops = 2.0 * n * n * n;
    const double t_tensor = median_seconds(
        [&] {
          const qkv::Tensor c = qkv::matmul(a, b);
          sink += c.data<float>()[0];
        },
        min_seconds);
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* pc = c_raw.data<float>();
    const int ni = static_cast<int>(n);
    const double t_raw = median_seconds(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, pa, ni, pb, ni,
                      0.0f, pc, ni);
          sink += pc[0];
        },
        min_seconds);
    const double gt = flops / t_tensor * 1e-9, gr = flops / t_raw * 1e-9;
    std::printf("| %-4lld | %19.1f | %19.1f | %5.2f |\n", static_cast<long long>(n), gt, gr,
                gt / gr);
  }
  // Keeps the products observable so nothing is optimised away.
  std::printf("\n(checksum %g)\n", static_cast<double>(sink));
  return 0;
}
