#include "nn/attention_variants.hpp"

#include <cmath>

#include "nn/attention.hpp"

namespace qkv::nn {

AttentionKind parse_attention_kind(const std::string& name) {
  return parse_name<AttentionKind>(name, "attention");
}

const char* attention_kind_name(AttentionKind k) { return name_of(k).data(); }

Tensor window_mask(int64_t n, int64_t m, int64_t w) {
  QKV_CHECK(n >= 0 && m >= 0 && w >= 0, "window_mask", "negative size ", n, " x ", m, " or window ",
            w);
  Tensor mask = empty({n, m}, DType::b8);
  uint8_t* p = mask.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) p[i * m + j] = std::abs(j - (i + m - n)) <= w;
  return mask;
}

namespace {

void check_mask(const Tensor& mask, const Shape& scores, const char* op) {
  if (!mask.defined()) return;
  QKV_CHECK(mask.dtype() == DType::b8, op, "mask must be bool (true = may attend), got ",
            dtype_name(mask.dtype()), " ", mask.shape());
  QKV_CHECK(broadcast_shapes(scores, mask.shape(), op) == scores, op, "mask ", mask.shape(),
            " does not broadcast to the scores ", scores);
}

void check_qkv(const Var& q, const Var& k, const Var& v, const char* op) {
  QKV_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.size(-1) == k.size(-1) &&
                k.size(-2) == v.size(-2) && q.size(0) == k.size(0) && k.size(0) == v.size(0) &&
                q.size(1) == k.size(1) && k.size(1) == v.size(1),
            op, "q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(),
            " do not fit (q: (B, h, n, d), k: (B, h, m, d), v: (B, h, m, d_v))");
}

Shape scores_shape(const Var& q, const Var& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2)};
}

// The softmax half shared by the scorers that form scores: mask, softmax, dropout, @ v.
Var softmax_attend(Var scores, const Var& v, const Tensor& mask, Var* weights, double dropout_p,
                   Generator* gen, const char* op) {
  if (mask.defined()) scores = ag::masked_fill(scores, logical_not(mask), -INFINITY);
  Var a = ag::softmax(scores, -1);
  if (weights) *weights = a;
  if (dropout_p > 0) {
    QKV_CHECK(gen, op, "dropout needs a generator");
    a = ag::dropout(a, dropout_p, *gen);
  }
  return ag::matmul(a, v);
}

// phi(x) = elu(x) + 1 > 0
Var feature(const Var& x) { return ag::add(ag::elu(x), 1.0); }

bool any_true(const Tensor& b) { return b.numel() > 0 && max(b.to(DType::f32)).item() > 0; }

}  // namespace

Var sliding_window_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                             double scale, int64_t window, Var* weights, double dropout_p,
                             Generator* dropout_gen) {
  QKV_CHECK(window >= 0, "sliding_window_attention", "window must be >= 0, got ", window);
  if (weights || dropout_p > 0) {
    const Tensor band = window_mask(q.size(-2), k.size(-2), window);
    return scaled_dot_product_attention(q, k, v, combine_masks(band, mask), scale, weights,
                                        dropout_p, dropout_gen);
  }
  return ag::local_attention(q, k, v, mask, scale, window, false);
}

Var additive_attention(const Var& q, const Var& k, const Var& v, const Var& w, const Tensor& mask,
                       Var* weights, double dropout_p, Generator* dropout_gen) {
  const char* op = "additive_attention";
  check_qkv(q, k, v, op);
  const int64_t h = q.size(1), d = q.size(3);
  QKV_CHECK(w.dim() == 2 && w.size(0) == h && w.size(1) == d, op, "w ", w.shape(),
            " must be (h, d) = ", Shape{h, d}, " for q ", q.shape());
  check_mask(mask, scores_shape(q, k), op);
  // tanh(q_i + k_j): (B, h, n, 1, d) + (B, h, 1, m, d) -> (B, h, n, m, d)
  const Var t = ag::tanh(ag::add(ag::unsqueeze(q, 3), ag::unsqueeze(k, 2)));
  const Var scores = ag::sum(ag::mul(t, ag::reshape(w, {1, h, 1, 1, d})), {4});  // (B, h, n, m)
  return softmax_attend(scores, v, mask, weights, dropout_p, dropout_gen, op);
}

LinearMask linear_attention_mask(const Tensor& mask, const Shape& batch, int64_t n, int64_t m) {
  const char* op = "linear_attention";
  LinearMask r;
  if (!mask.defined() || n == 0 || m == 0) return r;
  Shape full = batch;
  full.insert(full.end(), {n, m});
  check_mask(mask, full, op);
  const Tensor me = mask.expand(full);
  // Under key padding [AND causal] the last query sees every key that is not padding.
  r.key_valid = me.select(-2, n - 1);
  const Tensor rows = r.key_valid.unsqueeze(-2).expand(full);
  if (!any_true(ne(me, rows))) return r;
  r.causal = true;
  if (!any_true(ne(me, logical_and(causal_mask(n, m), rows)))) return r;
  throw Error(cat(op, ": mask ", mask.shape(),
                  " is neither key padding nor key padding AND causal; linear attention supports "
                  "only those"));
}

namespace {
// phi(q), and phi(k) with padded keys' features zeroed.
std::pair<Var, Var> features(const Var& q, const Var& k, const LinearMask& lm) {
  Var fk = feature(k);
  if (lm.key_valid.defined())
    fk = ag::mul(fk, ag::constant(lm.key_valid.unsqueeze(-1).to(k.dtype())));
  return {feature(q), fk};
}
}  // namespace

Var linear_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask, Var* weights) {
  if (weights) return linear_attention_quadratic(q, k, v, mask, weights);
  check_qkv(q, k, v, "linear_attention");
  const LinearMask lm = linear_attention_mask(mask, {q.size(0), q.size(1)}, q.size(2), k.size(2));
  const auto [fq, fk] = features(q, k, lm);
  return ag::linear_attention(fq, fk, v, lm.causal);
}

Var linear_attention_quadratic(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                               Var* weights) {
  check_qkv(q, k, v, "linear_attention");
  const int64_t n = q.size(2), m = k.size(2);
  const LinearMask lm = linear_attention_mask(mask, {q.size(0), q.size(1)}, n, m);
  const auto [fq, fk] = features(q, k, lm);
  Var a = ag::matmul(fq, ag::transpose(fk, -2, -1));  // (B, h, n, m), >= 0
  if (lm.causal) a = ag::masked_fill(a, logical_not(causal_mask(n, m)), 0.0);
  Var den = ag::sum(a, {3}, true);
  den = ag::masked_fill(den, eq(den.data(), 0.0), 1.0);  // rows with no key: weights stay 0
  const Var w = ag::div(a, den);
  if (weights) *weights = w;
  return ag::matmul(w, v);
}

}  // namespace qkv::nn
