// Bahdanau et al.'s (2015) alignment model: the decoder's previous state s_{i-1} scores every
// encoder annotation h_j,
//   e_ij = v_a . tanh(W_a s_{i-1} + U_a h_j),  a_ij = softmax_j(e_ij),  c_i = sum_j a_ij h_j,
// W_a: (n', n), U_a: (n', d_h), v_a: (n'), no biases (the paper's appendix A.1.2). U_a h_j does
// not depend on i: keys() forms it once per source, attend() then costs one (S, n') tanh a step.
// The score is additive_attention's (nn/attention_variants.hpp) with one head: q = W_a s_{i-1},
// k = U_a h_j, w = v_a.
//
// Padding: valid (B, S) bool, true on real source tokens; a padded h_j gets weight 0.
#pragma once
#include <memory>

#include "nn/layers.hpp"

namespace qkv::nn {

class BahdanauAttention : public Module {
 public:
  // state: n (the decoder's state), annotation: d_h (the encoder's output), hidden: n'.
  // W_a, U_a as nn::Linear (Xavier uniform), v_a U(-1/sqrt(n'), 1/sqrt(n')).
  BahdanauAttention(int64_t state, int64_t annotation, int64_t hidden, Generator& gen);

  // h: (B, S, d_h) -> U_a h: (B, 1, S, n'), the keys in additive_attention's layout.
  Var keys(const Var& h) const;
  struct Step {
    Var context;  // c_i (B, d_h)
    Var weights;  // a_i (B, S)
  };
  // s_prev: (B, n); keys: keys(h); h: (B, S, d_h); mask: (B, 1, 1, S) bool (key_padding_mask)
  Step attend(const Var& s_prev, const Var& keys, const Var& h, const Tensor& mask) const;

  std::shared_ptr<Linear> w_a, u_a;
  Var v_a;  // (1, n'): one head's scoring vector
};

}  // namespace qkv::nn
