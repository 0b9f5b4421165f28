// Fused attention: softmax(q k^T * scale, masked) v without the n x m matrix, forward and
// backward (core/attention.cpp). Saves only q, k, v, the output and a log-sum-exp per row.
// Rotary positions, which turn q and k before it, fused the same way (core/rotary.cpp).
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {

Var attention(const Var& q, const Var& k, const Var& v, const Tensor& mask, double scale) {
  AttentionResult r = attention_forward(q.data(), k.data(), v.data(), mask, scale);
  return record("attention", r.out, {q, k, v},
                [q_ = q.data(), k_ = k.data(), v_ = v.data(), mask, scale, out = r.out, lse = r.lse,
                 precision = r.precision](const Tensor& g) -> std::vector<Tensor> {
                  AttentionGrads d =
                      attention_backward(q_, k_, v_, mask, scale, out, lse, g, precision);
                  return {d.dq, d.dk, d.dv};
                });
}

Var rotary(const Var& x, const Tensor& cos, const Tensor& sin) {
  // Saves only the (n, d/2) tables: the backward turns g back by the same angles, without x.
  return record("rotary", rotary_forward(x.data(), cos, sin), {x},
                [cos, sin](const Tensor& g) -> std::vector<Tensor> {
                  return {rotary_backward(g, cos, sin)};
                });
}

}  // namespace qkv::ag
