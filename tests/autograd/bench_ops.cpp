// Per-op times on the shapes of `qkv bench`'s tiny and small models (batch 64, 32 tokens), so a
// change to one kernel can be measured alone. A program, not a test:
//   build/tests/autograd/bench_ops [threads=2] [d_model=128] [heads=4]
// (tiny: d_model 64, small: d_model 128; both 4 heads). Best of 5 rounds of 50 calls each.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "autograd/ops.hpp"
#include "core/fused.hpp"
#include "core/parallel.hpp"

using namespace qkv;

namespace {

double best_us(const std::function<void()>& f) {
  for (int i = 0; i < 5; ++i) f();
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const int calls = 50;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t d = argc > 2 ? std::atoi(argv[2]) : 128, heads = argc > 3 ? std::atoi(argv[3]) : 4;
  set_num_threads(threads);
  Generator g(1);
  const int64_t B = 64, n = 32, rows = B * n, dh = d / heads;
  const Tensor x = randn({rows, d}, g), y = randn({rows, d}, g);
  const Tensor w = randn({d, d}, g), bias = randn({d}, g);
  std::printf("%d threads; x: (%lld, %lld); attention: (%lld, %lld, %lld, %lld)\n\n", threads,
              static_cast<long long>(rows), static_cast<long long>(d), static_cast<long long>(B),
              static_cast<long long>(heads), static_cast<long long>(n), static_cast<long long>(dh));
  std::printf("| op | us per call |\n|---|---:|\n");
  auto row = [](const char* name, double us) { std::printf("| %s | %.1f |\n", name, us); };
  row("add (residual)", best_us([&] { (void)add(x, y); }));
  row("relu", best_us([&] { (void)relu(x); }));
  row("linear forward, d -> d", best_us([&] { (void)linear_forward(x, w, bias); }));
  row("sum_rows (bias gradient)", best_us([&] { (void)sum_rows(x); }));
  {
    const ag::Var vx(x, true), gain(randn({d}, g), true), shift(randn({d}, g), true);
    row("layer_norm forward", best_us([&] { (void)ag::layer_norm(vx, gain, shift); }));
    row("layer_norm forward + backward",
        best_us([&] { ag::layer_norm(vx, gain, shift).backward(y); }));
  }
  {
    const Tensor q = randn({B, heads, n, dh}, g), k = randn({B, heads, n, dh}, g);
    const Tensor v = randn({B, heads, n, dh}, g), dout = randn({B, heads, n, dh}, g);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
    AttentionResult r = attention_forward(q, k, v, Tensor(), scale);
    row("attention forward", best_us([&] { r = attention_forward(q, k, v, Tensor(), scale); }));
    row("attention backward",
        best_us([&] { (void)attention_backward(q, k, v, Tensor(), scale, r.out, r.lse, dout); }));
  }
  return 0;
}
