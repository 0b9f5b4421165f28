// Fused attention: softmax(q k^T * scale, masked) v without the n x m matrix, forward and
// backward (core/attention.cpp). Saves only q, k, v, the output and a log-sum-exp per row.
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

}  // namespace qkv::ag
