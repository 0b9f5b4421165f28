#include "nn/bahdanau_attention.hpp"

#include <cmath>

#include "nn/attention_variants.hpp"

namespace qkv::nn {

BahdanauAttention::BahdanauAttention(int64_t state, int64_t annotation, int64_t hidden,
                                     Generator& gen) {
  QKV_CHECK(state > 0 && annotation > 0 && hidden > 0, "BahdanauAttention",
            "sizes must be positive, got state ", state, " annotation ", annotation, " hidden ",
            hidden);
  w_a = register_module("W_a", std::make_shared<Linear>(state, hidden, gen, false));
  u_a = register_module("U_a", std::make_shared<Linear>(annotation, hidden, gen, false));
  const double a = 1.0 / std::sqrt(static_cast<double>(hidden));
  v_a = register_parameter("v_a", uniform({1, hidden}, -a, a, gen));
}

Var BahdanauAttention::keys(const Var& h) const {
  QKV_CHECK(h.dim() == 3 && h.size(2) == u_a->weight.size(1), "BahdanauAttention", "annotations ",
            h.shape(), " must be (B, S, ", u_a->weight.size(1), ")");
  return ag::unsqueeze(u_a->forward(h), 1);  // (B, 1, S, n')
}

BahdanauAttention::Step BahdanauAttention::attend(const Var& s_prev, const Var& keys, const Var& h,
                                                  const Tensor& mask) const {
  QKV_CHECK(s_prev.dim() == 2 && s_prev.size(0) == h.size(0), "BahdanauAttention", "state ",
            s_prev.shape(), " must be (B, n) for annotations ", h.shape());
  const int64_t b = h.size(0), n = w_a->weight.size(0);
  const Var q = ag::reshape(w_a->forward(s_prev), {b, 1, 1, n});  // (B, 1, 1, n')
  Var weights;                                                    // (B, 1, 1, S)
  const Var c = additive_attention(q, keys, ag::unsqueeze(h, 1), v_a, mask, &weights);
  return {ag::reshape(c, {b, h.size(2)}), ag::reshape(weights, {b, h.size(1)})};
}

}  // namespace qkv::nn
