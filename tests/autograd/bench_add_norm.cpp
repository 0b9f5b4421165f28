// The residual add and LayerNorm after it: the fused kernels (core/fused.hpp: add_norm_forward,
// norm_backward_rounded) against the ops they replace (add, layer_norm_forward and, in bf16,
// the rounding of the norm's output for the next product; layer_norm_backward and the
// rounding of dx for the product behind the add). A program, not a test:
//   build/tests/autograd/bench_add_norm [threads=2] [rows=2688] [d=512]
// (multi30k's decoder: 128 x 21 rows of 512; gpt-char: 768 rows of 128). The two alternate in
// each of 9 rounds of 20 calls; the best round of each and the median of the per-round ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "core/bf16.hpp"
#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"

using namespace qkv;

namespace {

double round_us(const std::function<void()>& f) {
  const int calls = 20;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
}

void compare(const char* what, const std::function<void()>& composed,
             const std::function<void()>& fused) {
  for (int i = 0; i < 3; ++i) composed(), fused();
  std::vector<double> c, f, ratio;
  for (int r = 0; r < 9; ++r) {
    c.push_back(round_us(composed));
    f.push_back(round_us(fused));
    ratio.push_back(f.back() / c.back());
  }
  std::sort(ratio.begin(), ratio.end());
  std::printf("| %s | %.1f | %.1f | %.3f |\n", what, *std::min_element(c.begin(), c.end()),
              *std::min_element(f.begin(), f.end()), ratio[ratio.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 2688;
  const int64_t d = argc > 3 ? std::atoll(argv[3]) : 512;
  set_num_threads(threads);
  Generator g(1);
  const Tensor x = randn({rows, d}, g), a = randn({rows, d}, g), dy = randn({rows, d}, g);
  const Tensor gain = ones({d}), shift = zeros({d});
  const LayerNormResult f = layer_norm_forward(add(x, a), gain, shift, 1e-5);
  std::vector<bf16_t> copy(rows * d);
  std::printf("%d threads; x: (%lld, %lld)\n\n", threads, static_cast<long long>(rows),
              static_cast<long long>(d));
  std::printf("| kernels | composed us | fused us | fused / composed |\n|---|---:|---:|---:|\n");
  for (const bool keep_sum : {false, true}) {
    compare(
        keep_sum ? "fp32 forward, the sum kept (pre-LN)" : "fp32 forward (post-LN)",
        [&] { (void)layer_norm_forward(add(x, a), gain, shift, 1e-5); },
        [&] { (void)add_norm_forward(x, a, gain, shift, 1e-5, true, keep_sum); });
  }
  compare(
      "fp32 backward", [&] { (void)layer_norm_backward(dy, gain, f.xhat, f.rstd); },
      [&] { (void)norm_backward_rounded(dy, gain, f.xhat, f.rstd, true); });
  if (!bf16_unsupported_reason().empty()) return 0;
  // a scope per call: each call's copy is a fresh one, as each step's are
  for (const bool keep_sum : {false, true}) {
    compare(
        keep_sum ? "bf16 forward + rounding, the sum kept" : "bf16 forward + rounding",
        [&] {
          PrecisionScope s(Precision::bf16);
          const LayerNormResult r = layer_norm_forward(add(x, a), gain, shift, 1e-5);
          to_bf16_rows(r.y.data<float>(), rows, d, d, copy.data());
        },
        [&] {
          PrecisionScope s(Precision::bf16);
          (void)add_norm_forward(x, a, gain, shift, 1e-5, true, keep_sum);
        });
  }
  compare(
      "bf16 backward + rounding",
      [&] {
        PrecisionScope s(Precision::bf16);
        const Tensor dx = layer_norm_backward(dy, gain, f.xhat, f.rstd);
        to_bf16_rows(dx.data<float>(), rows, d, d, copy.data());
      },
      [&] {
        PrecisionScope s(Precision::bf16);
        (void)norm_backward_rounded(dy, gain, f.xhat, f.rstd, true);
      });
  return 0;
}
