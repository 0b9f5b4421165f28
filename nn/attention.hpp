// Scaled dot-product attention and multi-head attention.
//
// MASK CONVENTION (the one convention in qkv): a mask is a bool Tensor where true means
// "may attend" (as PyTorch's scaled_dot_product_attention; the opposite of
// nn.MultiheadAttention's key_padding_mask). A mask broadcasts against the scores
// (B, H, n, m): a causal mask is (n, m), a key-padding mask is (B, 1, 1, m). Masks combine
// by AND (combine_masks). A query row with nothing to attend to gives a zero output and zero,
// finite gradients (never NaN).
#pragma once
#include <optional>
#include <string>

#include "nn/attention_scale.hpp"
#include "nn/attention_variants.hpp"
#include "nn/layers.hpp"
#include "nn/positional.hpp"

namespace qkv::nn {

// (n, m) bool, true where key j <= query i + (m - n): each query sees itself and the past.
Tensor causal_mask(int64_t n, int64_t m);
inline Tensor causal_mask(int64_t n) { return causal_mask(n, n); }
// valid: (B, m) bool, true on real tokens -> (B, 1, 1, m), ready to broadcast over heads and
// queries.
Tensor key_padding_mask(const Tensor& valid);
// AND of two masks (either may be undefined, meaning "attend everywhere").
Tensor combine_masks(const Tensor& a, const Tensor& b);

// q: (..., n, d_k), k: (..., m, d_k), v: (..., m, d_v) -> (..., n, d_v).
// scale: on q . k (nn/attention_scale.hpp; the default 1 / sqrt(d_k)). mask: bool, broadcastable to
// (..., n, m), or undefined. When weights is non-null it receives the attention weights (..., n,
// m). Dropout on the weights when dropout_p > 0 (training). bias: float, broadcastable to (..., n,
// m), or undefined: added to the scaled scores before the mask and the softmax (relative position
// bias); its gradient flows. A bias takes the dense path (the fused kernel has no bias input).
Var scaled_dot_product_attention(const Var& q, const Var& k, const Var& v,
                                 const Tensor& mask = Tensor(), AttentionScale scale = {},
                                 Var* weights = nullptr, double dropout_p = 0.0,
                                 Generator* dropout_gen = nullptr, const Var& bias = Var());

// Multi-head attention: h heads of width d_model / h, with projections W_Q, W_K, W_V, W_O
// (each d_model x d_model, biases optional), named w_q, w_k, w_v, w_o.
// kind picks the scorer (nn/attention_variants.hpp), which may add parameters of its own
// (additive: additive_v (h, d_head)), registered after w_o. window > 0 (dot only) restricts each
// query to keys within window positions (sliding-window attention); 0 attends everywhere.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t heads, Generator& gen, bool bias = true,
                     AttentionScale scale = {}, double dropout = 0.0,
                     std::shared_ptr<Generator> dropout_gen = nullptr,
                     AttentionKind kind = AttentionKind::dot, int64_t window = 0);

  // query: (B, n, d), key/value: (B, m, d) -> (B, n, d). Self-attention passes the same
  // tensor three times; cross-attention takes key/value from another sequence (m != n).
  // mask: bool broadcastable to (B, h, n, m). The weights (B, h, n, m) are the hook point
  // "pattern" (nn/hooks.hpp), formed only when a hook asks for them.
  Var forward(const Var& query, const Var& key, const Var& value,
              const Tensor& mask = Tensor()) const;

  // As forward, with keys and values already projected and split: k, v: (B, h, m, d_head).
  // Incremental decoding uses it with cached projections; q_offset is the position of the
  // first query (positions inside attention only: keys sit at 0 .. m - 1).
  Var attend(const Var& query, const Var& k, const Var& v, const Tensor& mask = Tensor(),
             int64_t q_offset = 0) const;
  // key (B, m, d) -> its projection split into heads (B, h, m, d_head), keys at positions
  // offset .. offset + m - 1 (rope rotates them there); likewise value (never rotated).
  Var project_key(const Var& key, int64_t offset = 0) const;
  Var project_value(const Var& value) const;

  // --- positions inside attention (self-attention only; cross-attention stays content-only) ---
  // relative: a learned bias per head and clipped offset j - i, the parameter "relative_bias"
  // (h, 2K + 1), zero at the start (nn/relative_bias.hpp). rope: queries and keys rotated by
  // their positions (nn/rotary.hpp), no parameters. Other kinds: content only (the default).
  void use_positions(PositionKind kind, int64_t relative_clip = 16);
  PositionKind position = PositionKind::none;
  Var relative_bias;

  // QK-norm (modded-nanogpt; Henry et al. 2020): each head's queries and keys RMS-normalised
  // (no gain) before rope and the scores, so q.k stays within d_head whatever the weights.
  // No parameters. Keys are normalised when projected (project_key), so caches hold them so.
  void use_qk_norm(double eps) { qk_norm_eps = eps; }
  double qk_norm_eps = 0;  // 0: off

  // Splits (B, n, d) into heads (B, h, n, d/h), and back.
  Var split_heads(const Var& x) const;
  Var merge_heads(const Var& x) const;

  int64_t d_model, heads, d_head;
  AttentionScale scale;  // dot only: attention_conflict refuses a fixed one for other scorers
  double dropout_p;
  std::shared_ptr<Generator> dropout_gen;
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
  AttentionKind kind;
  int64_t window;
  std::vector<Var> scorer_params;  // the scorer's own (Scorer::init), in registration order
  // Its hook points' names start with this ("blocks.0.attn."; nn/hooks.hpp): q, k, v, pattern, z.
  std::string hook_prefix = "attn.";
  // Appends its hook points' names in the order forward passes them: v, k, q, pattern, z.
  void list_hooks(std::vector<std::string>& out) const;

 private:
  // o (B, h, n, d_head) with the pattern hook applied: captured (formed by a second scorer call
  // without dropout, so o stays what the scorer's fast path computed) and, when replaced,
  // o = pattern v.
  Var hook_pattern(const Scoring& s, Var o) const;
};

}  // namespace qkv::nn
