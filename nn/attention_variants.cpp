#include "nn/attention_variants.hpp"

#include <cmath>

#include "nn/attention.hpp"

namespace qkv::nn {

AttentionKind parse_attention_kind(const std::string& name) {
  return parse_name<AttentionKind>(name, "attention");
}

const char* attention_kind_name(AttentionKind k) { return name_of(k).data(); }

void check_scores_mask(const Tensor& mask, const Shape& scores, const char* op) {
  if (!mask.defined()) return;
  QKV_CHECK(mask.dtype() == DType::b8, op, "mask must be bool (true = may attend), got ",
            dtype_name(mask.dtype()), " ", mask.shape());
  QKV_CHECK(broadcast_shapes(scores, mask.shape(), op) == scores, op, "mask ", mask.shape(),
            " does not broadcast to the scores ", scores);
}

void check_heads(const Var& q, const Var& k, const Var& v, const char* op) {
  QKV_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.size(-1) == k.size(-1) &&
                k.size(-2) == v.size(-2) && q.size(0) == k.size(0) && k.size(0) == v.size(0) &&
                q.size(1) == k.size(1) && k.size(1) == v.size(1),
            op, "q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(),
            " do not fit (q: (B, h, n, d), k: (B, h, m, d), v: (B, h, m, d_v))");
}

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

}  // namespace qkv::nn
