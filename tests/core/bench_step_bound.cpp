// bench_step_bound: how fast a bf16 training step of `qkv bench`'s gpt-char and multi30k could
// be if nothing but its products ran. Times each of the step's products (the shapes and
// counts `qkv bench --gemm-shapes` lists) in a loop through the step's own calls
// (linear_forward, linear_input_grad, linear_weight_grad in a bf16 PrecisionScope, operands
// rounded once), against the bf16 GEMM peak `qkv bench` measures (2048^3). The ceiling MFU is
// the model's FLOPs over the products' time at their loop rate plus attention's FLOPs at the
// peak: no step with these products can do better. Then the memory bandwidth the rest of a
// step (elementwise and row kernels) is bound by: a triad a = b + s c over arrays in L2 and in
// DRAM, on the same threads.
// Usage: bench_step_bound [threads=2] [min_seconds_per_shape=0.5]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/peaks.hpp"
#include "bench_timing.hpp"
#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"

using namespace qkv;
using qkv::bench_core::median_seconds;

namespace {

// C (n x m) = op(A) op(B) over k, as --gemm-shapes prints it; op "NT" is x W^T, "NN" dx = g W,
// "TN" dW = g^T x.
struct Product {
  int64_t n, m, k;
  const char* op;
  int calls;  // per training step
};

struct StepModel {
  const char* name;
  double attention_gflop;  // QK^T and PV, forward and backward (not among the products)
  std::vector<Product> products;
};

// Attention's matrix FLOPs as apps/bench_models.cpp counts them: 2 products of 2 B n m d per
// attention, times 3 for forward and backward.
double attention_gflop(int64_t B, int64_t n, int64_t m, int64_t d) {
  return 3.0 * 2 * 2.0 * B * n * m * d / 1e9;
}

std::vector<StepModel> models() {
  // gpt-char: batch 12 x 64 tokens = 768 rows, d 128, d_ff 512, 4 layers, 65 characters.
  const StepModel gpt{"gpt-char",
                      4 * attention_gflop(12, 64, 64, 128),
                      {{768, 128, 128, "NT", 16},
                       {768, 128, 128, "NN", 16},
                       {128, 128, 768, "TN", 16},
                       {768, 512, 128, "NT", 4},
                       {768, 512, 128, "NN", 4},
                       {512, 128, 768, "TN", 4},
                       {768, 128, 512, "NT", 4},
                       {768, 128, 512, "NN", 4},
                       {128, 512, 768, "TN", 4},
                       {768, 65, 128, "NT", 1},
                       {768, 128, 65, "NN", 1},
                       {65, 128, 768, "TN", 1}}};
  // multi30k: 128 sentences, 2176 source and 2688 target rows, d 256, d_ff 512, 3 + 3 layers,
  // vocabulary 6000. Per layer: encoder self-attention's 4 projections; decoder self-attention's
  // 4, cross-attention's query and output (2688 rows) and key and value (2176 rows).
  const StepModel m30k{
      "multi30k",
      3 * (attention_gflop(128, 17, 17, 256) + attention_gflop(128, 21, 21, 256) +
           attention_gflop(128, 21, 17, 256)),
      {{2176, 256, 256, "NT", 18}, {2176, 256, 256, "NN", 18}, {256, 256, 2176, "TN", 18},
       {2688, 256, 256, "NT", 18}, {2688, 256, 256, "NN", 18}, {256, 256, 2688, "TN", 18},
       {2176, 512, 256, "NT", 3},  {2176, 512, 256, "NN", 3},  {512, 256, 2176, "TN", 3},
       {2176, 256, 512, "NT", 3},  {2176, 256, 512, "NN", 3},  {256, 512, 2176, "TN", 3},
       {2688, 512, 256, "NT", 3},  {2688, 512, 256, "NN", 3},  {512, 256, 2688, "TN", 3},
       {2688, 256, 512, "NT", 3},  {2688, 256, 512, "NN", 3},  {256, 512, 2688, "TN", 3},
       {2688, 6000, 256, "NT", 1}, {2688, 256, 6000, "NN", 1}, {6000, 256, 2688, "TN", 1}}};
  return {gpt, m30k};
}

// The product as the step runs it, on operands rounded once (the scope's copies are reused).
double seconds_per_call(const Product& p, Generator& g, double min_seconds) {
  const std::string op = p.op;
  Tensor a, b;
  if (op == "NT") a = randn({p.n, p.k}, g), b = randn({p.m, p.k}, g);  // x (n, k), W (m, k)
  if (op == "NN") a = randn({p.n, p.k}, g), b = randn({p.k, p.m}, g);  // g (n, k), W (k, m)
  if (op == "TN") a = randn({p.k, p.n}, g), b = randn({p.k, p.m}, g);  // g (k, n), x (k, m)
  PrecisionScope bf16(Precision::bf16);
  float sink = 0;
  const double s = median_seconds(
      [&] {
        const Tensor c = op == "NT"   ? linear_forward(a, b, Tensor())
                         : op == "NN" ? linear_input_grad(a, b)
                                      : linear_weight_grad(a, b);
        sink += c.data<float>()[0];
      },
      min_seconds);
  if (sink == 12345.f) std::printf(" ");  // keeps the products observable
  return s;
}

// GB/s of a = b + s c over three arrays of `floats` elements each, on the current threads,
// counting 12 bytes an element (two reads, one write).
double triad_gb_per_s(int64_t floats, double min_seconds) {
  std::vector<float> a(floats), b(floats, 1.0f), c(floats, 2.0f);
  const double s = median_seconds(
      [&] {
#pragma omp parallel for schedule(static) num_threads(get_num_threads())
        for (int64_t i = 0; i < floats; ++i) a[i] = b[i] + 0.5f * c[i];
      },
      min_seconds);
  if (a[floats / 2] != 2.0f) std::printf("triad: wrong result\n");
  return 12.0 * floats / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double min_seconds = argc > 2 ? std::atof(argv[2]) : 0.5;
  const std::string why = bf16_unsupported_reason();
  if (!why.empty()) {
    std::printf("bench_step_bound: skipped, bf16 does not run here: %s\n", why.c_str());
    return 0;
  }
  set_num_threads(threads);
  const double peak = bench::bf16_gemm_peak_gflops();  // as `qkv bench` measures it
  std::printf(
      "bf16 products of a training step in a loop, %d threads; bf16 GEMM peak %.1f GFLOP/s\n",
      get_num_threads(), peak);
  Generator g(0);
  for (const StepModel& model : models()) {
    std::printf("\n%s:\n\n| C (n x m), k | op | calls/step | us/call | GFLOP/s | %% of peak |\n",
                model.name);
    std::printf("|---|---|---:|---:|---:|---:|\n");
    double seconds = 0, gflop = 0;
    for (const Product& p : model.products) {
      const double s = seconds_per_call(p, g, min_seconds);
      const double f = 2.0 * p.n * p.m * p.k / 1e9;
      seconds += p.calls * s;
      gflop += p.calls * f;
      std::printf("| %lld x %lld, k %lld | %s | %d | %.1f | %.0f | %.0f%% |\n",
                  static_cast<long long>(p.n), static_cast<long long>(p.m),
                  static_cast<long long>(p.k), p.op, p.calls, s * 1e6, f / s, 100 * f / s / peak);
    }
    const double total = gflop + model.attention_gflop;
    const double bound_s = seconds + model.attention_gflop / peak;
    std::printf(
        "\nproducts %.2f GFLOP in %.2f ms a step (%.0f GFLOP/s, %.0f%% of peak); attention %.2f "
        "GFLOP at the peak %.2f ms; model %.2f GFLOP a step: a step of products alone %.2f ms, "
        "MFU ceiling %.0f%%\n",
        gflop, seconds * 1e3, gflop / seconds, 100 * gflop / seconds / peak, model.attention_gflop,
        model.attention_gflop / peak * 1e3, total, bound_s * 1e3, 100 * total / bound_s / peak);
  }
  std::printf("\nmemory bandwidth, triad a = b + s c (12 bytes an element), %d threads:\n",
              get_num_threads());
  std::printf("  3 x 256 KiB (in L2): %.1f GB/s\n", triad_gb_per_s(64 << 10, min_seconds));
  std::printf("  3 x 4 MiB: %.1f GB/s\n", triad_gb_per_s(1 << 20, min_seconds));
  std::printf("  3 x 64 MiB (DRAM): %.1f GB/s\n", triad_gb_per_s(16 << 20, min_seconds));
  return 0;
}
