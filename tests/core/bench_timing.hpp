// Timing for the core benchmarks (bench_matmul, bench_weight_grad): not tests, run by hand.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace qkv::bench_core {

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

}  // namespace qkv::bench_core
