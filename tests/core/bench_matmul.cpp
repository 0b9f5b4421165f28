// bench_matmul: float32 matmul GFLOP/s through qkv::matmul (one single-threaded GEMM band per
// thread, core/matmul.cpp) next to one raw cblas_sgemm call (OpenBLAS's own threading) on the
// same buffers: square sizes and the GEMMs of `qkv bench`'s models.
// Usage: bench_matmul [threads=2] [min_seconds_per_shape=0.5]
#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_timing.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"

using qkv::bench_core::median_seconds;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double min_seconds = argc > 2 ? std::atof(argv[2]) : 0.5;
  qkv::set_num_threads(threads);
  std::printf("matmul float32, %d threads (OpenBLAS %s, parallel=%d), median of timings\n\n",
              qkv::get_num_threads(), openblas_get_config(), openblas_get_parallel());
  std::printf(
      "| C = op(A) op(B): n x m, k | what | qkv::matmul us | GFLOP/s | "
      "cblas_sgemm us | GFLOP/s | qkv / cblas time |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  struct Shape3 {
    int64_t n, m, k;
    bool ta, tb;  // A stored (k, n) / B stored (m, k), read transposed
    const char* what;
  };
  const Shape3 shapes[] = {
      {64, 64, 64, false, false, "square"},
      {256, 256, 256, false, false, "square"},
      {1024, 1024, 1024, false, false, "square (the bench's roof)"},
      {2048, 64, 64, false, true, "tiny: x W^T"},
      {2048, 128, 128, false, true, "small: x W^T"},
      {2048, 512, 128, false, true, "small: feed-forward in"},
      {2048, 128, 128, false, false, "small: dx = g W"},
      {128, 128, 2048, true, false, "small: dW = g^T x"},
      {2048, 16, 128, false, true, "small: logits"},
      {800, 2048, 512, false, true, "annotated: feed-forward in"},
      {512, 512, 800, true, false, "annotated: dW = g^T x"},
      {768, 128, 128, false, true, "gpt-char: x W^T"},
      {128, 128, 768, true, false, "gpt-char: dW = g^T x"},
      {2688, 256, 256, false, true, "multi30k: x W^T"},
      {256, 256, 2688, true, false, "multi30k: dW = g^T x"},
  };
  qkv::Generator g(0);
  float sink = 0;
  for (const Shape3& s : shapes) {
    // Stored layouts; the Tensor views below present them as (n, k) and (k, m).
    const qkv::Tensor a_st = s.ta ? qkv::randn({s.k, s.n}, g) : qkv::randn({s.n, s.k}, g);
    const qkv::Tensor b_st = s.tb ? qkv::randn({s.m, s.k}, g) : qkv::randn({s.k, s.m}, g);
    const qkv::Tensor a = s.ta ? a_st.t() : a_st, b = s.tb ? b_st.t() : b_st;
    qkv::Tensor c_raw = qkv::empty({s.n, s.m});
    const double flops = 2.0 * s.n * s.m * s.k;
    const double t_qkv = median_seconds(
        [&] {
          const qkv::Tensor c = qkv::matmul(a, b);
          sink += c.data<float>()[0];
        },
        min_seconds);
    const float* pa = a_st.data<float>();
    const float* pb = b_st.data<float>();
    float* pc = c_raw.data<float>();
    const int n = static_cast<int>(s.n), m = static_cast<int>(s.m), k = static_cast<int>(s.k);
    const double t_raw = median_seconds(
        [&] {
          cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans,
                      s.tb ? CblasTrans : CblasNoTrans, n, m, k, 1.0f, pa, s.ta ? n : k, pb,
                      s.tb ? k : m, 0.0f, pc, m);
          sink += pc[0];
        },
        min_seconds);
    std::printf("| %lld x %lld, %lld%s%s | %s | %.1f | %.1f | %.1f | %.1f | %.2f |\n",
                static_cast<long long>(s.n), static_cast<long long>(s.m),
                static_cast<long long>(s.k), s.ta ? ", A^T" : "", s.tb ? ", B^T" : "", s.what,
                t_qkv * 1e6, flops / t_qkv * 1e-9, t_raw * 1e6, flops / t_raw * 1e-9,
                t_qkv / t_raw);
  }
  // Keeps the products observable so nothing is optimised away.
  std::printf("\n(checksum %g)\n", static_cast<double>(sink));
  return 0;
}
