// Sliding-window and linear attention as differentiable ops over the core kernels
// (core/local_attention.cpp, core/linear_attention.cpp). Each saves its inputs and output
// plus one number per query row (lse, den): O(n) beyond the inputs, never O(n m).
#include "autograd/ops.hpp"
#include "core/attention_variants.hpp"

namespace qkv::ag {

Var local_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask, double scale,
                    int64_t window, bool causal) {
  AttentionResult r =
      local_attention_forward(q.data(), k.data(), v.data(), mask, scale, window, causal);
  return record("local_attention", r.out, {q, k, v},
                [q_ = q.data(), k_ = k.data(), v_ = v.data(), mask, scale, window, causal,
                 out = r.out, lse = r.lse](const Tensor& g) -> std::vector<Tensor> {
                  AttentionGrads d = local_attention_backward(q_, k_, v_, mask, scale, window,
                                                              causal, out, lse, g);
                  return {d.dq, d.dk, d.dv};
                });
}

Var linear_attention(const Var& fq, const Var& fk, const Var& v, bool causal) {
  LinearAttentionResult r = linear_attention_forward(fq.data(), fk.data(), v.data(), causal);
  return record("linear_attention", r.out, {fq, fk, v},
                [fq_ = fq.data(), fk_ = fk.data(), v_ = v.data(), causal, out = r.out,
                 den = r.den](const Tensor& g) -> std::vector<Tensor> {
                  LinearAttentionGrads d =
                      linear_attention_backward(fq_, fk_, v_, causal, out, den, g);
                  return {d.dfq, d.dfk, d.dv};
                });
}

}  // namespace qkv::ag
