// GRU and LSTM layers and the 1-D convolution: each one node on the tape, its backward the
// kernel's (core/recurrent.cpp, core/conv1d.cpp). A recurrence's one output is the packed
// (B, n + k, H) tensor (outputs, then the final h, then c); out, h and c are views of it, so a
// loss on any of them reaches the one backward.
#include "autograd/ops.hpp"
#include "core/recurrent.hpp"

namespace qkv::ag {
namespace {

RecurrentOut record_recurrent(RecurrentCell cell, const Var& x, const Tensor& valid, const Var& h0,
                              const Var& c0, const Var& w_ih, const Var& w_hh, const Var& b_ih,
                              const Var& b_hh, bool reverse) {
  const RecurrentWeights w{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data()};
  const Tensor h0t = h0.defined() ? h0.data() : Tensor(), c0t = c0.defined() ? c0.data() : Tensor();
  RecurrentResult f = recurrent_forward(cell, x.data(), valid, h0t, c0t, w, reverse);
  std::vector<Var> inputs = {x, w_ih, w_hh, b_ih, b_hh};
  if (h0.defined()) inputs.push_back(h0);
  if (c0.defined()) inputs.push_back(c0);
  const int64_t n = f.steps;
  const Var packed =
      record(cell == RecurrentCell::gru ? "gru" : "lstm", f.packed, inputs,
             [cell, x_ = x.data(), valid, w, reverse, f, has_h0 = h0.defined(),
              has_c0 = c0.defined()](const Tensor& g) -> std::vector<Tensor> {
               RecurrentGrads d = recurrent_backward(cell, x_, valid, w, reverse, f, g);
               std::vector<Tensor> grads = {d.dx, d.dw_ih, d.dw_hh, d.db_ih, d.db_hh};
               if (has_h0) grads.push_back(d.dh0);
               if (has_c0) grads.push_back(d.dc0);
               return grads;
             });
  RecurrentOut r{narrow(packed, 1, 0, n), select(packed, 1, n), Var()};
  if (cell == RecurrentCell::lstm) r.c = select(packed, 1, n + 1);
  return r;
}

}  // namespace

RecurrentOut gru(const Var& x, const Tensor& valid, const Var& h0, const Var& w_ih, const Var& w_hh,
                 const Var& b_ih, const Var& b_hh, bool reverse) {
  return record_recurrent(RecurrentCell::gru, x, valid, h0, Var(), w_ih, w_hh, b_ih, b_hh, reverse);
}

RecurrentOut lstm(const Var& x, const Tensor& valid, const Var& h0, const Var& c0, const Var& w_ih,
                  const Var& w_hh, const Var& b_ih, const Var& b_hh, bool reverse) {
  return record_recurrent(RecurrentCell::lstm, x, valid, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse);
}

Var conv1d(const Var& x, const Var& w, const Var& b, const Tensor& valid, int64_t dilation,
           bool causal) {
  const Tensor out = conv1d_forward(x.data(), w.data(), b.defined() ? b.data() : Tensor(), valid,
                                    dilation, causal);
  std::vector<Var> inputs = {x, w};
  if (b.defined()) inputs.push_back(b);
  return record("conv1d", out, inputs,
                [x_ = x.data(), w_ = w.data(), has_b = b.defined(), valid, dilation,
                 causal](const Tensor& g) -> std::vector<Tensor> {
                  Conv1dGrads d = conv1d_backward(x_, w_, has_b, valid, dilation, causal, g);
                  std::vector<Tensor> grads = {d.dx, d.dw};
                  if (has_b) grads.push_back(d.dbias);
                  return grads;
                });
}

}  // namespace qkv::ag
