// The attention scorers MultiHeadAttention chooses among ([model] attention and window; the
// registry QKV_ATTENTIONS in nn/kinds.hpp), and the functions behind them. All follow
// nn/attention.hpp's conventions: q: (B, h, n, d), k: (B, h, m, d), v: (B, h, m, d_v) -> (B, h, n,
// d_v); masks bool broadcastable to (B, h, n, m), true = may attend; a query with nothing to attend
// to gives a zero row. weights, when non-null, receives the (B, h, n, m) attention weights
// (computing them costs the n x m matrix).
#pragma once
#include <span>
#include <string>

#include "nn/kinds.hpp"
#include "nn/layers.hpp"

namespace qkv::nn {

// ------------------------------------------------------------------------------- the scorers

// What MultiHeadAttention hands its scorer: the heads after their projections (and after
// QK-norm and rope, where configured).
struct Scoring {
  const Var& q;                 // (B, h, n, d_head)
  const Var& k;                 // (B, h, m, d_head)
  const Var& v;                 // (B, h, m, d_head)
  const Tensor& mask;           // bool, broadcastable to (B, h, n, m); undefined: all keys
  AttentionScale scale;         // on q . k, for takes_scale scorers; the default elsewhere
  const Var& bias;              // (1, h, n, m) or undefined; set only for takes_bias scorers
  int64_t window;               // 0: every key; > 0 only for takes_window scorers
  double dropout_p;             // on the weights, 0 outside training or without drops_weights
  Generator* dropout_gen;       // non-null when dropout_p > 0
  Var* weights;                 // non-null: receives the (B, h, n, m) attention weights
  std::span<const Var> params;  // the scorer's own parameters, in the order init made them
};

// A scorer: its attention function and the parameters it adds to each attention layer.
struct Scorer {
  const char* description;  // "additive scorer": named in gradcheck's layer list
  // -> (B, h, n, d_head), before the heads are merged and projected by W_O
  Var (*attend)(const Scoring& s);
  // The layer's own parameters (names and initial values, drawn from gen), registered after
  // W_O in this order; null for a scorer without any.
  NamedTensors (*init)(int64_t heads, int64_t d_head, Generator& gen);
};

// scorer_NAME for each line of QKV_ATTENTIONS, defined in nn/scorers/NAME.cpp.
#define QKV_SCORER_DECLARE(name, bias, window, drops, dense, scale) \
  extern const Scorer scorer_##name;
QKV_ATTENTIONS(QKV_SCORER_DECLARE)
#undef QKV_SCORER_DECLARE

inline const Scorer& scorer_of(AttentionKind k) {
  switch (k) {
#define QKV_SCORER_CASE(name, bias, window, drops, dense, scale) \
  case AttentionKind::name:                                      \
    return scorer_##name;
    QKV_ATTENTIONS(QKV_SCORER_CASE)
#undef QKV_SCORER_CASE
  }
  return scorer_dot;
}

// ----------------------------------------------------------------- the functions behind them

AttentionKind parse_attention_kind(const std::string& name);  // "dot" | "additive" | "linear"
const char* attention_kind_name(AttentionKind k);

// (n, m) bool, true where |j - (i + m - n)| <= w: the band sliding-window attention keeps
// (query i aligned with key position i + m - n, as causal_mask). Dense; for tests and weights.
Tensor window_mask(int64_t n, int64_t m, int64_t w);

// Sliding-window dot-product attention: scaled_dot_product_attention restricted to
// window_mask(n, m, window) AND mask. Uses the banded kernel (O(n w), ag::local_attention)
// unless weights, dropout or a bias (as scaled_dot_product_attention's) need the dense path,
// which gives the same numbers.
Var sliding_window_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                             AttentionScale scale, int64_t window, Var* weights = nullptr,
                             double dropout_p = 0.0, Generator* dropout_gen = nullptr,
                             const Var& bias = Var());

// The softmax half of a scorer that forms scores (B, h, n, m): mask (false -> -inf), softmax,
// weights out, dropout on them, @ v. op names the scorer in errors.
Var softmax_attend(Var scores, const Var& v, const Tensor& mask, Var* weights, double dropout_p,
                   Generator* dropout_gen, const char* op);
// Throws (naming op) unless q: (B, h, n, d), k: (B, h, m, d), v: (B, h, m, d_v) fit.
void check_heads(const Var& q, const Var& k, const Var& v, const char* op);
// Throws unless mask (when defined) is bool and broadcasts to scores, e.g. (B, h, n, m).
void check_scores_mask(const Tensor& mask, const Shape& scores, const char* op);

// Additive attention (Bahdanau et al. 2015) per head: score_ij = w_h . tanh(q_i + k_j) with
// w: (h, d) (one vector per head), then mask, softmax and weights @ v as for dot product.
// Forms (B, h, n, m, d): meant for short sequences.
Var additive_attention(const Var& q, const Var& k, const Var& v, const Var& w, const Tensor& mask,
                       Var* weights = nullptr, double dropout_p = 0.0,
                       Generator* dropout_gen = nullptr);

// Linear attention (Katharopoulos et al. 2020) with phi(x) = elu(x) + 1:
// out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / (phi(q_i) . sum_j phi(k_j)). The mask may only be
// key padding, optionally AND causal (the decoder's self-attention mask): padded keys get zero
// features, causal runs as prefix sums. Any other mask is an error. O(n d^2), no n x m matrix
// unless weights are asked for.
Var linear_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                     Var* weights = nullptr);
// The same function in its quadratic form: A_ij = phi(q_i) . phi(k_j) (0 for masked keys and,
// causal, future keys), weights = A / row sums, out = weights v. The reference in tests.
Var linear_attention_quadratic(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                               Var* weights = nullptr);

// How linear attention reads a mask: the keys it keeps (broadcastable to (B, h, m); undefined:
// all) and whether it is causal. Throws when the mask is not key padding [AND causal].
struct LinearMask {
  Tensor key_valid;
  bool causal = false;
};
LinearMask linear_attention_mask(const Tensor& mask, const Shape& batch, int64_t n, int64_t m);

}  // namespace qkv::nn
