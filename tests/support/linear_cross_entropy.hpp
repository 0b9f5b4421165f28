// The chunked cases of the fused output layer and loss (core/fused.hpp's
// linear_cross_entropy_forward / _backward, ag::linear_cross_entropy): the same inputs for the
// kernels against float32 (tests/core/test_linear_cross_entropy.cpp) and the op against PyTorch
// (tests/nn/test_linear_cross_entropy_reference.cpp). Header-only: the two link different
// libraries.
#pragma once
#include <cstdint>

#include "core/random.hpp"
#include "core/tensor.hpp"

namespace qkv::testing {

// The sizes: 300 rows (chunks of 128, 128 and 44), d 40, a 1031-word vocabulary.
inline constexpr int64_t kLceRows = 300, kLceDim = 40, kLceVocab = 1031;

struct LceProblem {
  Tensor x, w, b, t;  // x (N, d), w (V, d), b (V) or undefined, float32; t (N) int64
  int64_t ignore = -100;
  double eps = 0;     // label smoothing
  int64_t count = 0;  // rows whose target is not ignore
};

// The chunks' first and last rows, the last row, every 7th: their targets are ignored.
inline bool lce_ignored_row(int64_t i) {
  return i % 7 == 3 || i == 127 || i == 128 || i == 255 || i == 256 || i == kLceRows - 1;
}

// w ~ N(0.5, 1): a mean off zero, so that the smoothing term's share of dx, eps/V sum_j w_j,
// stands out of bf16's noise. x ~ 0.25 N(0, 1) + 0.2 (w[t] - 0.5): each row leans to its
// target (its probability about 0.2), so the target's term and the smoothing term differ.
inline LceProblem lce_problem(bool bias, int64_t ignore, double eps, uint64_t seed) {
  const int64_t n = kLceRows, d = kLceDim, v = kLceVocab;
  Generator g(seed);
  LceProblem p;
  p.ignore = ignore;
  p.eps = eps;
  const Tensor wn = randn({v, d}, g);
  p.w = add(wn, 0.5);
  p.t = randint({n}, 0, v, g);
  p.x = add(mul(randn({n, d}, g), 0.25), mul(index_select(wn, 0, p.t), 0.2));
  if (bias) p.b = randn({v}, g);
  int64_t* t = p.t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (lce_ignored_row(i)) t[i] = ignore;
    if (t[i] != ignore) ++p.count;
  }
  return p;
}

}  // namespace qkv::testing
