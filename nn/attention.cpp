#include "nn/attention.hpp"

#include <algorithm>
#include <cmath>

#include "nn/hooks.hpp"
#include "nn/relative_bias.hpp"
#include "nn/rotary.hpp"

namespace qkv::nn {

Tensor causal_mask(int64_t n, int64_t m) {
  QKV_CHECK(n >= 0 && m >= 0, "causal_mask", "negative size ", n, " x ", m);
  Tensor mask = empty({n, m}, DType::b8);
  uint8_t* p = mask.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) p[i * m + j] = j <= i + (m - n);
  return mask;
}

Tensor key_padding_mask(const Tensor& valid) {
  QKV_CHECK(valid.dtype() == DType::b8 && valid.dim() == 2, "key_padding_mask",
            "expected a bool (B, m) mask, got ", dtype_name(valid.dtype()), " ", valid.shape());
  return valid.unsqueeze(1).unsqueeze(1);
}

Tensor combine_masks(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return logical_and(a, b);
}

Var scaled_dot_product_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                                 AttentionScale scale, Var* weights, double dropout_p,
                                 Generator* dropout_gen, const Var& bias) {
  QKV_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && q.size(-1) == k.size(-1) &&
                k.size(-2) == v.size(-2),
            "scaled_dot_product_attention", "q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(),
            " do not fit (q: (..., n, d_k), k: (..., m, d_k), v: (..., m, d_v))");
  const double s = scale.resolve(q.size(-1));
  // The fused kernel (no (n, m) tensor) whenever nothing needs the weights themselves: not
  // the caller, not dropout. It wants one batch shape for q, k and v (no broadcasting).
  const bool same_batch = q.dim() == k.dim() && k.dim() == v.dim() &&
                          std::equal(q.shape().begin(), q.shape().end() - 2, k.shape().begin()) &&
                          std::equal(q.shape().begin(), q.shape().end() - 2, v.shape().begin());
  if (!weights && dropout_p == 0 && same_batch && !bias.defined()) {
    if (mask.defined()) {
      QKV_CHECK(mask.dtype() == DType::b8, "scaled_dot_product_attention",
                "mask must be bool (true = may attend), got ", dtype_name(mask.dtype()), " ",
                mask.shape());
      Shape sshape(q.shape().begin(), q.shape().end() - 1);
      sshape.push_back(k.size(-2));
      QKV_CHECK(broadcast_shapes(sshape, mask.shape(), "scaled_dot_product_attention") == sshape,
                "scaled_dot_product_attention", "mask ", mask.shape(),
                " does not broadcast to the scores ", sshape);
    }
    return ag::attention(q, k, v, mask, s);
  }
  // The reference path: scores = q k^T * s: (..., n, m)
  Var scores = ag::mul(ag::matmul(q, ag::transpose(k, -2, -1)), s);
  if (bias.defined()) {
    // the bias must broadcast to the scores without growing them
    bool fits = bias.dtype() == scores.dtype() && bias.dim() <= scores.dim();
    for (int64_t i = 1; fits && i <= bias.dim(); ++i)
      fits = bias.size(-i) == 1 || bias.size(-i) == scores.size(-i);
    QKV_CHECK(fits, "scaled_dot_product_attention", "bias ", dtype_name(bias.dtype()), " ",
              bias.shape(), " does not broadcast to the scores ", dtype_name(scores.dtype()), " ",
              scores.shape());
    scores = ag::add(scores, bias);
  }
  if (mask.defined()) {
    QKV_CHECK(mask.dtype() == DType::b8, "scaled_dot_product_attention",
              "mask must be bool (true = may attend), got ", dtype_name(mask.dtype()), " ",
              mask.shape());
    QKV_CHECK(broadcast_shapes(scores.shape(), mask.shape(), "scaled_dot_product_attention") ==
                  scores.shape(),
              "scaled_dot_product_attention", "mask ", mask.shape(),
              " does not broadcast to the scores ", scores.shape());
    // -inf where attending is not allowed; softmax turns an all -inf row into zeros.
    scores = ag::masked_fill(scores, logical_not(mask), -INFINITY);
  }
  Var a = ag::softmax(scores, -1);
  if (weights) *weights = a;
  if (dropout_p > 0) {
    QKV_CHECK(dropout_gen, "scaled_dot_product_attention", "dropout needs a generator");
    a = ag::dropout(a, dropout_p, *dropout_gen);
  }
  return ag::matmul(a, v);
}

MultiHeadAttention::MultiHeadAttention(int64_t d, int64_t h, Generator& gen, bool bias,
                                       AttentionScale s, double dropout,
                                       std::shared_ptr<Generator> dgen, AttentionKind k, int64_t w)
    : d_model(d),
      heads(h),
      d_head(h > 0 ? d / h : 0),
      scale(s),
      dropout_p(dropout),
      dropout_gen(std::move(dgen)),
      kind(k),
      window(w) {
  QKV_CHECK(w >= 0, "MultiHeadAttention", "window must be >= 0 (0: full), got ", w);
  if (const auto conflict = attention_conflict(k, PositionKind::none, w, dropout, d_head, s))
    throw Error(cat("MultiHeadAttention: ", conflict->key, ": ", conflict->why));
  QKV_CHECK(h > 0 && d > 0 && d % h == 0, "MultiHeadAttention", "d_model ", d,
            " is not divisible by heads ", h);
  QKV_CHECK(dropout == 0 || dropout_gen, "MultiHeadAttention", "dropout needs a generator");
  w_q = register_module("w_q", std::make_shared<Linear>(d, d, gen, bias));
  w_k = register_module("w_k", std::make_shared<Linear>(d, d, gen, bias));
  w_v = register_module("w_v", std::make_shared<Linear>(d, d, gen, bias));
  w_o = register_module("w_o", std::make_shared<Linear>(d, d, gen, bias));
  if (const Scorer& scorer = scorer_of(k); scorer.init)
    for (const auto& [name, init] : scorer.init(h, d_head, gen))
      scorer_params.push_back(register_parameter(name, init));
}

Var MultiHeadAttention::split_heads(const Var& x) const {
  // (B, n, d) -> (B, n, h, d_head) -> (B, h, n, d_head): a view, no copy
  return ag::transpose(ag::reshape(x, {x.size(0), x.size(1), heads, d_head}), 1, 2);
}

Var MultiHeadAttention::merge_heads(const Var& x) const {
  // (B, h, n, d_head) -> (B, n, h, d_head) -> (B, n, d)
  return ag::reshape(ag::transpose(x, 1, 2), {x.size(0), x.size(2), d_model});
}

Var MultiHeadAttention::forward(const Var& query, const Var& key, const Var& value,
                                const Tensor& mask) const {
  QKV_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3 && query.size(-1) == d_model &&
                key.size(-1) == d_model && value.size(-1) == d_model &&
                key.size(1) == value.size(1) && query.size(0) == key.size(0) &&
                key.size(0) == value.size(0),
            "MultiHeadAttention", "query ", query.shape(), ", key ", key.shape(), ", value ",
            value.shape(), " for d_model ", d_model, " (expected (B, n, d) and (B, m, d))");
  // Values, then keys: the order their hook points pass (hook_points) and their ops are
  // recorded in, written out rather than left to the compiler's order of arguments.
  const Var v = project_value(value);
  const Var k = project_key(key);
  return attend(query, k, v, mask);
}

Var MultiHeadAttention::attend(const Var& query, const Var& k, const Var& v, const Tensor& mask,
                               int64_t q_offset) const {
  Var q = split_heads(w_q->forward(query));  // (B, h, n, d_head)
  if (qk_norm_eps > 0) q = ag::rms_norm(q, Var(), qk_norm_eps);
  Var bias;
  if (position == PositionKind::rope) q = rotary(q, q_offset);
  q = hook_point(q, hook_prefix, "q");
  if (position == PositionKind::relative)
    bias = relative_position_bias(relative_bias, q.size(2), k.size(2), q_offset);  // (1, h, n, m)
  // window and the bias reach only scorers that take them (attention_conflict, when set)
  const Scoring scoring{q,
                        k,
                        v,
                        mask,
                        scale,
                        bias,
                        window,
                        is_training() ? dropout_p : 0.0,
                        dropout_gen.get(),
                        nullptr,
                        scorer_params};
  Var o = scorer_of(kind).attend(scoring);  // (B, h, n, d_head)
  if (hooks_active()) o = hook_point(hook_pattern(scoring, o), hook_prefix, "z");
  return w_o->forward(merge_heads(o));  // (B, n, d)
}

Var MultiHeadAttention::hook_pattern(const Scoring& s, Var o) const {
  if (!hook_wanted(hook_prefix, "pattern")) return o;
  Var pattern;  // formed again, with weights, drawing no dropout
  Scoring again = s;
  again.dropout_p = 0;
  again.weights = &pattern;
  scorer_of(kind).attend(again);
  const detail::Hooked p = detail::run_hook(pattern, hook_prefix, "pattern");
  if (!p.replaced) return o;
  Var a = p.value;
  if (s.dropout_p > 0) a = ag::dropout(a, s.dropout_p, *s.dropout_gen);
  return ag::matmul(a, s.v);  // (B, h, n, d_head)
}

// ------------------------------------------------------------------ positions inside attention

Var MultiHeadAttention::project_key(const Var& key, int64_t offset) const {
  Var k = split_heads(w_k->forward(key));  // (B, h, m, d_head)
  if (qk_norm_eps > 0) k = ag::rms_norm(k, Var(), qk_norm_eps);
  if (position == PositionKind::rope) k = rotary(k, offset);
  return hook_point(k, hook_prefix, "k");
}

Var MultiHeadAttention::project_value(const Var& value) const {
  return hook_point(split_heads(w_v->forward(value)), hook_prefix, "v");
}

void MultiHeadAttention::list_hooks(std::vector<std::string>& out) const {
  for (const char* n : {"v", "k", "q", "pattern", "z"}) out.push_back(hook_prefix + n);
}

void MultiHeadAttention::use_positions(PositionKind kind, int64_t clip) {
  QKV_CHECK(position == PositionKind::none, "MultiHeadAttention", "positions already set");
  QKV_CHECK(kind != PositionKind::relative || clip >= 1, "MultiHeadAttention",
            "relative_clip must be >= 1, got ", clip);
  if (const auto conflict = attention_conflict(this->kind, kind, window, dropout_p, d_head))
    throw Error(cat("MultiHeadAttention: ", conflict->key, ": ", conflict->why));
  if (kind == PositionKind::relative)
    relative_bias = register_parameter("relative_bias", zeros({heads, 2 * clip + 1}));
  if (kind == PositionKind::relative || kind == PositionKind::rope) position = kind;
}

}  // namespace qkv::nn
