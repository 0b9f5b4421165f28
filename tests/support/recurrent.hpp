// The recurrences and the convolution written as composed autograd ops, straight from their
// equations (core/recurrent.hpp): the references the fused ops (ag::gru, ag::lstm, ag::conv1d)
// are tested against in float64, and the unrolled form they are timed against
// (tests/autograd/bench_recurrent.cpp). Every time step's input projection is one product, as
// in the fused op; each step is then a dozen small ops on the tape.
#pragma once
#include <vector>

#include "autograd/ops.hpp"

namespace qkv::testing {

// ag::gru (lstm = false) or ag::lstm, one direction, one step at a time. x: (B, n, d), valid:
// (B, n) bool or undefined, h0, c0: (B, H) or undefined.
inline ag::RecurrentOut unrolled_recurrence(bool lstm, const ag::Var& x, const Tensor& valid,
                                            ag::Var h, ag::Var c, const ag::Var& w_ih,
                                            const ag::Var& w_hh, const ag::Var& b_ih,
                                            const ag::Var& b_hh, bool reverse) {
  using namespace ag;
  const int64_t B = x.size(0), n = x.size(1), H = w_hh.size(1);
  if (!h.defined()) h = constant(zeros({B, H}, x.dtype()));
  if (lstm && !c.defined()) c = constant(zeros({B, H}, x.dtype()));
  const Var xp = linear(x, w_ih, b_ih);  // (B, n, G H): every step's input projection
  std::vector<Var> outs(n);
  for (int64_t s = 0; s < n; ++s) {
    const int64_t t = reverse ? n - 1 - s : s;
    const std::vector<Var> gi = chunk(select(xp, 1, t), lstm ? 4 : 3, 1);
    const std::vector<Var> gh = chunk(linear(h, w_hh, b_hh), lstm ? 4 : 3, 1);
    Var h_new, c_new;
    if (!lstm) {
      const Var r = sigmoid(gi[0] + gh[0]), z = sigmoid(gi[1] + gh[1]);
      const Var nn = tanh(gi[2] + r * gh[2]);
      h_new = (1.0 - z) * nn + z * h;
    } else {
      const Var i = sigmoid(gi[0] + gh[0]), f = sigmoid(gi[1] + gh[1]);
      const Var g = tanh(gi[2] + gh[2]), o = sigmoid(gi[3] + gh[3]);
      c_new = f * c + i * g;
      h_new = o * tanh(c_new);
    }
    if (!valid.defined()) {
      h = h_new, c = c_new, outs[t] = h_new;
      continue;
    }
    const Tensor real = valid.select(1, t).unsqueeze(1);  // (B, 1)
    h = where(real, h_new, h);
    if (lstm) c = where(real, c_new, c);
    outs[t] = masked_fill(h_new, logical_not(real), 0.0);
  }
  return {stack(outs, 1), h, lstm ? c : Var()};
}

// ag::conv1d from its definition: the sum over taps j of the input shifted by j dilation -
// left (zeros outside, padded positions zeroed first) times w[:, :, j]^T, plus the bias, the
// padded positions of the output zeroed. x: (B, n, C_in), w: (C_out, C_in, k).
inline ag::Var composed_conv1d(const ag::Var& x_in, const ag::Var& w, const ag::Var& b,
                               const Tensor& valid, int64_t dilation, bool causal) {
  using namespace ag;
  const int64_t B = x_in.size(0), n = x_in.size(1), cin = x_in.size(2), k = w.size(2);
  const int64_t left = causal ? (k - 1) * dilation : (k - 1) * dilation / 2;
  const int64_t right = (k - 1) * dilation - left;
  const Tensor pad = valid.defined() ? logical_not(valid).unsqueeze(2) : Tensor();
  const Var x = pad.defined() ? masked_fill(x_in, pad, 0.0) : x_in;
  std::vector<Var> parts;
  if (left > 0) parts.push_back(constant(zeros({B, left, cin}, x.dtype())));
  parts.push_back(x);
  if (right > 0) parts.push_back(constant(zeros({B, right, cin}, x.dtype())));
  const Var padded = concat(parts, 1);
  Var out;
  for (int64_t j = 0; j < k; ++j) {
    const Var tap = matmul(narrow(padded, 1, j * dilation, n), transpose(select(w, 2, j), 0, 1));
    out = out.defined() ? out + tap : tap;
  }
  if (b.defined()) out = out + b;
  return pad.defined() ? masked_fill(out, pad, 0.0) : out;
}

}  // namespace qkv::testing
