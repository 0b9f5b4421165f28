// The cost of recording: forward passes of a small MLP with the tape on (as in training)
// against NoGrad, interleaved, median of many rounds. A program, not a test:
//   build/tests/autograd/bench_tape [threads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "autograd/ops.hpp"
#include "core/parallel.hpp"

using namespace qkv;
using namespace qkv::ag;

int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? std::atoi(argv[1]) : 1);
  Generator g(1);
  // batch 64, 32 -> 64 -> 64 -> 10
  const Var w1(uniform({64, 32}, -0.2, 0.2, g), true), b1(zeros({64}), true);
  const Var w2(uniform({64, 64}, -0.2, 0.2, g), true), b2(zeros({64}), true);
  const Var w3(uniform({10, 64}, -0.2, 0.2, g), true), b3(zeros({10}), true);
  const Var x(randn({64, 32}, g));
  const Tensor t = randint({64}, 0, 10, g);
  auto forward = [&] {
    const Var h1 = relu(linear(x, w1, b1));
    const Var h2 = relu(linear(h1, w2, b2));
    return cross_entropy(linear(h2, w3, b3), t);
  };
  auto time_us = [&](bool tape, int reps) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      if (tape) {
        Var l = forward();
        (void)l;
      } else {
        NoGrad off;
        Var l = forward();
        (void)l;
      }
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count() /
           reps;
  };
  time_us(true, 200);
  time_us(false, 200);
  std::vector<double> on, off;
  for (int r = 0; r < 31; ++r) {
    on.push_back(time_us(true, 100));
    off.push_back(time_us(false, 100));
  }
  std::sort(on.begin(), on.end());
  std::sort(off.begin(), off.end());
  const double a = on[on.size() / 2], b = off[off.size() / 2];
  std::printf(
      "MLP 64x(32-64-64-10) forward, %d thread(s): tape %.1f us, NoGrad %.1f us, overhead %.1f us "
      "(%.0f%%)\n",
      get_num_threads(), a, b, a - b, 100.0 * (a - b) / b);
  return 0;
}
