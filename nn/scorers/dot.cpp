// attention = "dot": scaled dot product (nn/attention.hpp), with the sliding window and the
// relative position bias, the scorer every other one is measured against.
#include <cmath>

#include "nn/attention.hpp"

namespace qkv::nn {

Tensor window_mask(int64_t n, int64_t m, int64_t w) {
  QKV_CHECK(n >= 0 && m >= 0 && w >= 0, "window_mask", "negative size ", n, " x ", m, " or window ",
            w);
  Tensor mask = empty({n, m}, DType::b8);
  uint8_t* p = mask.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) p[i * m + j] = std::abs(j - (i + m - n)) <= w;
  return mask;
}

Var sliding_window_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                             AttentionScale scale, int64_t window, Var* weights, double dropout_p,
                             Generator* dropout_gen, const Var& bias) {
  QKV_CHECK(window >= 0, "sliding_window_attention", "window must be >= 0, got ", window);
  if (weights || dropout_p > 0 || bias.defined()) {  // the banded kernel takes none of them
    const Tensor band = window_mask(q.size(-2), k.size(-2), window);
    return scaled_dot_product_attention(q, k, v, combine_masks(band, mask), scale, weights,
                                        dropout_p, dropout_gen, bias);
  }
  return ag::local_attention(q, k, v, mask, scale.resolve(q.size(-1)), window, false);
}

namespace {

Var attend(const Scoring& s) {
  if (s.window == 0)
    return scaled_dot_product_attention(s.q, s.k, s.v, s.mask, s.scale, s.weights, s.dropout_p,
                                        s.dropout_gen, s.bias);
  return sliding_window_attention(s.q, s.k, s.v, s.mask, s.scale, s.window, s.weights, s.dropout_p,
                                  s.dropout_gen, s.bias);
}

}  // namespace

const Scorer scorer_dot{"scaled dot product", attend, nullptr};

}  // namespace qkv::nn
