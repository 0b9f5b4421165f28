// Attention variants that avoid the n x m matrix by structure, not only by tiling:
// sliding-window (local) attention computes only a band of the scores, linear attention
// (Katharopoulos et al. 2020) never computes scores at all. Both have plain-op equivalents
// (nn/attention.hpp) they are tested against.
//
// Shapes: q: (..., n, d_k), k: (..., m, d_k), v: (..., m, d_v), one batch shape "..." for all
// three (no broadcasting). Query i is aligned with key position i + (m - n), as causal_mask
// does, so a single new query (n = 1) against m cached keys is the last position.
// Outputs of 4-d inputs are laid out (B, n, H, d_v) so merging heads is a view.
#pragma once
#include "fused.hpp"  // AttentionResult, AttentionGrads: the tiled kernel's, shared
#include "tensor.hpp"

namespace qkv {

// --- sliding-window attention (core/local_attention.cpp) ---
//
// softmax over the keys j with |j - p_i| <= window (causal: 0 <= p_i - j <= window), where
// p_i = i + (m - n), of q_i.k_j * scale, further restricted by mask (bool, broadcastable to
// (..., n, m), true = may attend, or undefined). Only the band is computed: O(n w) time, and
// memory O(n) per head beyond the inputs (the backward recomputes the band from lse).
// A query with no key left gives a zero row and zero gradients. Deterministic: each output
// row belongs to one work item; key gradients are summed per batch entry in a fixed order.
AttentionResult local_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& mask, double scale, int64_t window,
                                        bool causal);
AttentionGrads local_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& mask, double scale, int64_t window,
                                        bool causal, const Tensor& out, const Tensor& lse,
                                        const Tensor& dout);

// --- linear attention (core/linear_attention.cpp) ---
//
// fq: (..., n, d), fk: (..., m, d) are feature maps (phi(q), phi(k) >= 0; a padded key has an
// all-zero feature row), v: (..., m, d_v).
//   out_i = fq_i^T S_i / (fq_i . z_i),  S_i = sum_{j in J(i)} fk_j v_j^T,  z_i = sum_{j in J(i)}
//   fk_j
// J(i) is every key, or with causal the keys j <= i + (m - n) (prefix sums, one pass).
// Time O((n + m) d d_v), memory O((n + m) d) per head: no (n, m) or (n, d, d_v) tensor.
// A row whose denominator is 0 (no visible key) gives zeros and zero gradients.
struct LinearAttentionResult {
  Tensor out;  // (..., n, d_v)
  Tensor den;  // (..., n): fq_i . z_i, kept for the backward
};
LinearAttentionResult linear_attention_forward(const Tensor& fq, const Tensor& fk, const Tensor& v,
                                               bool causal);
struct LinearAttentionGrads {
  Tensor dfq, dfk, dv;
};
LinearAttentionGrads linear_attention_backward(const Tensor& fq, const Tensor& fk, const Tensor& v,
                                               bool causal, const Tensor& out, const Tensor& den,
                                               const Tensor& dout);

}  // namespace qkv
