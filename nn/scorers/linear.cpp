// attention = "linear": Katharopoulos et al. (2020), elu + 1 feature maps instead of softmax,
// O(n d^2) with no n x m matrix.
#include "nn/attention.hpp"

namespace qkv::nn {

namespace {

// phi(x) = elu(x) + 1 > 0
Var feature(const Var& x) { return ag::add(ag::elu(x), 1.0); }

bool any_true(const Tensor& b) { return b.numel() > 0 && max(b.to(DType::f32)).item() > 0; }

// phi(q), and phi(k) with padded keys' features zeroed.
std::pair<Var, Var> features(const Var& q, const Var& k, const LinearMask& lm) {
  Var fk = feature(k);
  if (lm.key_valid.defined())
    fk = ag::mul(fk, ag::constant(lm.key_valid.unsqueeze(-1).to(k.dtype())));
  return {feature(q), fk};
}

}  // namespace

LinearMask linear_attention_mask(const Tensor& mask, const Shape& batch, int64_t n, int64_t m) {
  const char* op = "linear_attention";
  LinearMask r;
  if (!mask.defined() || n == 0 || m == 0) return r;
  Shape full = batch;
  full.insert(full.end(), {n, m});
  check_scores_mask(mask, full, op);
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

Var linear_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask, Var* weights) {
  if (weights) return linear_attention_quadratic(q, k, v, mask, weights);
  check_heads(q, k, v, "linear_attention");
  const LinearMask lm = linear_attention_mask(mask, {q.size(0), q.size(1)}, q.size(2), k.size(2));
  const auto [fq, fk] = features(q, k, lm);
  return ag::linear_attention(fq, fk, v, lm.causal);
}

Var linear_attention_quadratic(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                               Var* weights) {
  check_heads(q, k, v, "linear_attention");
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

namespace {
Var attend(const Scoring& s) { return linear_attention(s.q, s.k, s.v, s.mask, s.weights); }
}  // namespace

const Scorer scorer_linear{"linear attention", attend, nullptr};

}  // namespace qkv::nn
