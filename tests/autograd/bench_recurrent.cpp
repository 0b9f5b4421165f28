// Forward + backward time of one GRU / LSTM layer as ONE tape op (ag::gru, ag::lstm: the
// backward through time written out in core/recurrent.cpp) against the same equations unrolled
// into small ops on the tape (tests/support/recurrent.hpp: one input product for all steps,
// then a dozen ops per step), and of conv1d against its taps composed. Median of rounds, each
// round a few passes; float32. A program, not a test:
//   build/tests/autograd/bench_recurrent [threads] [B n d]     (default: 2 threads, 32 64 128)
//
// Measured 2026-12-07 on a 2-core AMD EPYC (lscpu model name "AMD EPYC"), B 32, n 64,
// d = H 128, while two other builds ran on the machine (load average 6-7 on 2 cores), ms:
//              1 thread: one op  unrolled        2 threads: one op  unrolled
//   gru                    40.4     85.0 (2.1x)               190      843 (4.4x)
//   lstm                   64.9    142.4 (2.2x)               442     1639 (3.7x)
//   conv1d (k 3, dil 2)    24.0     29.6 (1.2x)               111       65 (0.6x)
// PyTorch 1.13 on the same shapes and machine at the same time, 1 thread: nn.GRU 41.4,
// nn.LSTM 54.0, nn.Conv1d 11.9 (/usr/bin/python3, torch.autograd.grad of the same sums).
// So the recurrences stay one op each: the unrolled tape is 2x slower on one thread, and worse
// on two, where each of its ~20 ops per step is a parallel region of its own.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "autograd/ops.hpp"
#include "core/parallel.hpp"
#include "support/recurrent.hpp"

using namespace qkv;
using namespace qkv::ag;

namespace {

// Median milliseconds of one call of f over 15 rounds of reps calls, after a warm-up round.
double median_ms(const std::function<void()>& f, int reps) {
  std::vector<double> ms;
  for (int r = 0; r < 16; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) f();
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        reps;
    if (r > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? std::atoi(argv[1]) : 2);
  const int64_t B = argc > 4 ? std::atoll(argv[2]) : 32, n = argc > 4 ? std::atoll(argv[3]) : 64,
                d = argc > 4 ? std::atoll(argv[4]) : 128, H = d;
  Generator g(1);
  const Var x(randn({B, n, d}, g), true);
  const Tensor R = randn({B, n, H}, g);
  std::printf("B %lld, n %lld, d = H %lld, %d thread(s), forward + backward, median ms\n",
              static_cast<long long>(B), static_cast<long long>(n), static_cast<long long>(d),
              get_num_threads());
  for (bool lstm : {false, true}) {
    const int64_t G = lstm ? 4 : 3;
    const std::vector<Var> in = {x, Var(uniform({G * H, d}, -0.1, 0.1, g), true),
                                 Var(uniform({G * H, H}, -0.1, 0.1, g), true),
                                 Var(uniform({G * H}, -0.1, 0.1, g), true),
                                 Var(uniform({G * H}, -0.1, 0.1, g), true)};
    auto pass = [&](bool fused) {
      const RecurrentOut o =
          !fused ? testing::unrolled_recurrence(lstm, in[0], Tensor(), Var(), Var(), in[1], in[2],
                                                in[3], in[4], false)
          : lstm ? ag::lstm(in[0], Tensor(), Var(), Var(), in[1], in[2], in[3], in[4])
                 : ag::gru(in[0], Tensor(), Var(), in[1], in[2], in[3], in[4]);
      grad({o.out}, {R}, in);
    };
    const double one = median_ms([&] { pass(true); }, 3);
    const double unrolled = median_ms([&] { pass(false); }, 3);
    std::printf("%-6s one op %8.2f   unrolled %8.2f   unrolled / one op %.2fx\n",
                lstm ? "lstm" : "gru", one, unrolled, unrolled / one);
  }
  const Var w(uniform({H, d, 3}, -0.1, 0.1, g), true), b(zeros({H}), true);
  auto conv = [&](bool fused) {
    const Var y = fused ? conv1d(x, w, b, Tensor(), 2, true)
                        : testing::composed_conv1d(x, w, b, Tensor(), 2, true);
    grad({y}, {R}, {x, w, b});
  };
  const double one = median_ms([&] { conv(true); }, 3);
  const double composed = median_ms([&] { conv(false); }, 3);
  std::printf("%-6s one op %8.2f   composed %8.2f   composed / one op %.2fx  (k 3, dilation 2)\n",
              "conv1d", one, composed, composed / one);
  return 0;
}
