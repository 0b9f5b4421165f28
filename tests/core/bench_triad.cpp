// bench_triad: the memory bandwidth the rest of a training step (its elementwise and row
// kernels) is bound by: a triad a = b + s c over arrays in L2, in L3-sized blocks and in DRAM,
// on the step's threads. Its products alone in a loop are `qkv bench`'s loop rates
// (bench/loop_rate.hpp: every run prints "products at their loop rate" and "everything else").
// Usage: bench_triad [threads=2] [min_seconds=0.5]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_timing.hpp"
#include "core/parallel.hpp"

using namespace qkv;
using qkv::bench_core::median_seconds;

namespace {

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
  set_num_threads(threads);
  std::printf("memory bandwidth, triad a = b + s c (12 bytes an element), %d threads:\n",
              get_num_threads());
  std::printf("  3 x 256 KiB (in L2): %.1f GB/s\n", triad_gb_per_s(64 << 10, min_seconds));
  std::printf("  3 x 4 MiB: %.1f GB/s\n", triad_gb_per_s(1 << 20, min_seconds));
  std::printf("  3 x 64 MiB (DRAM): %.1f GB/s\n", triad_gb_per_s(16 << 20, min_seconds));
  return 0;
}
