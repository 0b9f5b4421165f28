// bench_weight_grad: how far qkv's weight-gradient products (dW = g^T x, OpenBLAS in one
// single-threaded band per thread) are from a plain unpacked kernel, at the `qkv bench` models'
// shapes. A measurement for docs/performance.md ("What is left, measured"), not a kernel qkv
// uses: the unpacked kernel reads g and x in place (row t of g gives 8 contiguous outputs'
// rows, row t of x 32 contiguous columns), so two threads split C's tiles without packing the
// same operand twice, which OpenBLAS's bands do. Needs AVX-512; no K blocking.
// Usage: bench_weight_grad [threads=2] [min_seconds_per_shape=0.5]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bench_timing.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>

namespace {

// c (8 x 32, row stride ldc) = a^T b over k rows: a's row t holds the 8 rows of c at stride lda,
// b's row t the 32 columns at stride ldb.
void tile_8x32(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
               int64_t ldc) {
  __m512 acc[8][2];
  for (auto& r : acc) r[0] = r[1] = _mm512_setzero_ps();
  for (int64_t t = 0; t < k; ++t) {
    const __m512 b0 = _mm512_loadu_ps(b + t * ldb), b1 = _mm512_loadu_ps(b + t * ldb + 16);
    for (int r = 0; r < 8; ++r) {
      const __m512 ar = _mm512_set1_ps(a[t * lda + r]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < 8; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
  }
}

// g: (rows, n), x: (rows, m) -> c: (n, m) = g^T x; n a multiple of 8, m of 32. The tiles are
// taken column block by column block, so a block of x stays in cache across its tiles.
void unpacked_weight_grad(const qkv::Tensor& g, const qkv::Tensor& x, qkv::Tensor& c) {
  const int64_t rows = g.size(0), n = g.size(1), m = x.size(1), tiles_n = n / 8;
  const float* pg = g.data<float>();
  const float* px = x.data<float>();
  float* pc = c.data<float>();
  qkv::parallel_for(tiles_n * (m / 32), qkv::kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t i0 = (t % tiles_n) * 8, j0 = (t / tiles_n) * 32;
      tile_8x32(rows, pg + i0, n, px + j0, m, pc + i0 * m + j0, m);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  using qkv::bench_core::median_seconds;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double min_seconds = argc > 2 ? std::atof(argv[2]) : 0.5;
  qkv::set_num_threads(threads);
  std::printf("dW = g^T x, float32, %d threads, median of timings\n\n", qkv::get_num_threads());
  std::printf(
      "| dW (n x m), k | model | qkv::matmul us | GFLOP/s | unpacked us | GFLOP/s | "
      "matmul / unpacked time | max rel. diff |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  struct Shape3 {
    int64_t n, m, k;
    const char* model;
  };
  const Shape3 shapes[] = {{64, 64, 2048, "tiny"},       {128, 128, 2048, "small"},
                           {128, 128, 768, "gpt-char"},  {128, 512, 768, "gpt-char"},
                           {512, 128, 768, "gpt-char"},  {256, 256, 2176, "multi30k"},
                           {256, 256, 2688, "multi30k"}, {256, 512, 2688, "multi30k"}};
  qkv::Generator gen(0);
  for (const Shape3& s : shapes) {
    const qkv::Tensor g = qkv::randn({s.k, s.n}, gen), x = qkv::randn({s.k, s.m}, gen);
    qkv::Tensor ref, own = qkv::empty({s.n, s.m});
    const double t_qkv = median_seconds([&] { ref = qkv::matmul(g.t(), x); }, min_seconds);
    const double t_own = median_seconds([&] { unpacked_weight_grad(g, x, own); }, min_seconds);
    double worst = 0;  // the two sum in different orders: a check that both compute dW
    for (int64_t i = 0; i < own.numel(); ++i) {
      const double r = ref.data<float>()[i], o = own.data<float>()[i];
      worst = std::max(worst, std::abs(r - o) / (std::abs(r) + 1e-3 * std::sqrt(double(s.k))));
    }
    const double gf = 2.0 * s.n * s.m * s.k * 1e-9;
    std::printf("| %lld x %lld, %lld | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.1e |\n",
                static_cast<long long>(s.n), static_cast<long long>(s.m),
                static_cast<long long>(s.k), s.model, t_qkv * 1e6, gf / t_qkv, t_own * 1e6,
                gf / t_own, t_qkv / t_own, worst);
  }
  return 0;
}

#else
int main() {
  std::printf("bench_weight_grad needs AVX-512 (build with QKV_NATIVE=ON on such a CPU)\n");
  return 0;
}
#endif
