// attention = "additive": Bahdanau et al. (2015), score_ij = w_h . tanh(q_i + k_j) per head.
#include <cmath>

#include "nn/attention.hpp"

namespace qkv::nn {

Var additive_attention(const Var& q, const Var& k, const Var& v, const Var& w, const Tensor& mask,
                       Var* weights, double dropout_p, Generator* dropout_gen) {
  const char* op = "additive_attention";
  check_heads(q, k, v, op);
  const int64_t h = q.size(1), d = q.size(3);
  QKV_CHECK(w.dim() == 2 && w.size(0) == h && w.size(1) == d, op, "w ", w.shape(),
            " must be (h, d) = ", Shape{h, d}, " for q ", q.shape());
  check_scores_mask(mask, {q.size(0), h, q.size(2), k.size(2)}, op);
  // tanh(q_i + k_j): (B, h, n, 1, d) + (B, h, 1, m, d) -> (B, h, n, m, d)
  const Var t = ag::tanh(ag::add(ag::unsqueeze(q, 3), ag::unsqueeze(k, 2)));
  const Var scores = ag::sum(ag::mul(t, ag::reshape(w, {1, h, 1, 1, d})), {4});  // (B, h, n, m)
  return softmax_attend(scores, v, mask, weights, dropout_p, dropout_gen, op);
}

namespace {

// s.params: {additive_v (h, d_head)}
Var attend(const Scoring& s) {
  return additive_attention(s.q, s.k, s.v, s.params[0], s.mask, s.weights, s.dropout_p,
                            s.dropout_gen);
}

// additive_v (h, d_head): one scoring vector per head, U(-1/sqrt(d_head), 1/sqrt(d_head)).
NamedTensors init(int64_t heads, int64_t d_head, Generator& gen) {
  const double a = 1.0 / std::sqrt(static_cast<double>(d_head));
  return {{"additive_v", uniform({heads, d_head}, -a, a, gen)}};
}

}  // namespace

const Scorer scorer_additive{"additive scorer", attend, init};

}  // namespace qkv::nn
