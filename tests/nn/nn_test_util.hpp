// Helpers shared by the nn tests: small models, float64 leaves, error measures, temp dirs.
#pragma once
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/parallel.hpp"
#include "core/random.hpp"
#include "nn/seq2seq.hpp"
#include "test_util.hpp"

namespace qkv::nn::test {

// A leaf of the given shape, uniform in [lo, hi), that requires grad.
inline ag::Var leaf(const Shape& s, Generator& g, DType dt = DType::f64, double lo = -1,
                    double hi = 1) {
  return ag::Var(uniform(s, lo, hi, g, dt), true);
}

// max|a - b| / max|b|: the relative error of a whole tensor against a reference b.
// When b is all zeros this is max|a - b| (relative to 1).
inline double rel_err(const Tensor& a, const Tensor& b) {
  const double den = max(abs(b.to(DType::f64))).item();
  const double num = max_abs_diff(a.to(DType::f64), b.to(DType::f64));
  return num / (den > 0 ? den : 1.0);
}

// (B, n) bool: true on the first len[b] positions of row b (real tokens), false after (padding).
inline Tensor valid_mask(const std::vector<int64_t>& lens, int64_t n) {
  Tensor m = zeros({static_cast<int64_t>(lens.size()), n}, DType::b8);
  uint8_t* p = m.data<uint8_t>();
  for (size_t b = 0; b < lens.size(); ++b)
    for (int64_t j = 0; j < std::min(lens[b], n); ++j) p[static_cast<int64_t>(b) * n + j] = 1;
  return m;
}

// A tiny Seq2Seq without dropout, for gradcheck and incremental decoding.
inline ModelConfig tiny_config(bool norm_first, bool final_norm = false) {
  ModelConfig c;
  c.src_vocab = 7;
  c.tgt_vocab = 6;
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 12;
  c.encoder_layers = 1;
  c.decoder_layers = 2;
  c.dropout = 0.0;
  c.norm_first = norm_first;
  c.final_norm = final_norm;
  return c;
}

// gradcheck calls a tiny model thousands of times; on a loaded machine an OpenMP region per
// small op costs far more than the op, and results do not depend on the thread count: the nn
// tests run such checks inside ScopedThreads(1).
using qkv::test::ScopedThreads;
using qkv::test::TempDir;

}  // namespace qkv::nn::test
