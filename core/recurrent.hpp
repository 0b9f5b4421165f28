// Recurrences (GRU, LSTM) and the 1-D convolution, forward and backward, as plain kernels: the
// autograd ops (autograd/ops_recurrent.cpp) record each layer of each direction as ONE tape node
// whose backward through time is written out here, beside its forward, instead of n steps of
// small ops (measured in tests/autograd/bench_recurrent.cpp; numbers in autograd/ops.hpp).
//
// Equations and weight layouts are PyTorch's (torch.nn.GRU / LSTM / Conv1d), so weights load
// from torch unchanged:
//   GRU, gates (r, z, n) in the rows of w_ih (3H, d), w_hh (3H, H), b_ih, b_hh (3H):
//     r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)      z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
//     n = tanh(W_in x + b_in + r * (W_hn h + b_hn))   h' = (1 - z) * n + z * h
//   LSTM, gates (i, f, g, o) in the rows of w_ih (4H, d), w_hh (4H, H), b_ih, b_hh (4H):
//     i, f, o = sigmoid(W_* x + b_i* + W_h* h + b_h*)  g = tanh(W_ig x + b_ig + W_hg h + b_hg)
//     c' = f * c + i * g                             h' = o * tanh(c')
//
// Padding: valid (B, n) bool (true = a real position) or undefined (all real). A padded
// position is skipped: the state passes through it unchanged, its output is 0 and its input
// gets no gradient. With valid a prefix mask (lengths) this is torch's packed sequence, in
// either direction: the reverse direction starts at each row's last real position.
//
// Products: the input projections of all time steps are one GEMM (B n, d) x (d, G H) before the
// sweep; each step's recurrent product (B, H) x (H, G H) is one GEMM; the weight gradients are
// one GEMM each after the backward sweep. All through kernel::gemm_bands in the inputs' dtype
// (float32 or float64; a bf16 PrecisionScope does not apply). Deterministic for a given thread
// count: every product is banded as matmul's, every other element is computed by one thread.
#pragma once
#include <cstdint>

#include "tensor.hpp"

namespace qkv {

enum class RecurrentCell { gru, lstm };

// Gate rows per hidden unit: 3 for the GRU, 4 for the LSTM.
inline int64_t gate_count(RecurrentCell c) { return c == RecurrentCell::gru ? 3 : 4; }

struct RecurrentWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;  // (G H, d), (G H, H), (G H), (G H)
};

struct RecurrentResult {
  // (B, n + k, H), k = 1 (GRU) or 2 (LSTM): positions 0 .. n-1 are the outputs (h_t at real
  // positions, 0 at padded ones), position n the final h, n + 1 the final c (LSTM). One tensor
  // so the op has one output; out(), h_last(), c_last() are views into it.
  Tensor packed;
  // Kept for the backward, in step order (step s reads position s, or n-1-s when reverse):
  Tensor states;  // (n + 1, B, H): h before step 0 (h0) and after every step
  Tensor cells;   // LSTM: (n + 1, B, H), c likewise; undefined for the GRU
  Tensor gates;   // (n, B, 4H): GRU r, z, n, W_hn h + b_hn; LSTM i, f, g, o (activated)
  int64_t steps = 0;
  Tensor out() const { return packed.narrow(1, 0, steps); }      // (B, n, H)
  Tensor h_last() const { return packed.select(1, steps); }      // (B, H)
  Tensor c_last() const { return packed.select(1, steps + 1); }  // (B, H), LSTM only
};

// x: (B, n, d) float32 or float64, any strides; valid: (B, n) bool or undefined; h0, c0: (B, H)
// or undefined (zeros; c0 for the LSTM only); reverse: run from position n-1 down to 0.
RecurrentResult recurrent_forward(RecurrentCell cell, const Tensor& x, const Tensor& valid,
                                  const Tensor& h0, const Tensor& c0, const RecurrentWeights& w,
                                  bool reverse);

struct RecurrentGrads {
  Tensor dx;                          // (B, n, d)
  Tensor dh0, dc0;                    // (B, H); dc0 undefined for the GRU
  Tensor dw_ih, dw_hh, db_ih, db_hh;  // the weights' shapes
};
// dpacked: (B, n + k, H), the gradient of RecurrentResult::packed; x, valid, w, reverse: the
// forward's; f: its result.
RecurrentGrads recurrent_backward(RecurrentCell cell, const Tensor& x, const Tensor& valid,
                                  const RecurrentWeights& w, bool reverse, const RecurrentResult& f,
                                  const Tensor& dpacked);

// --- 1-D convolution over positions (core/conv1d.cpp) ---
// torch.nn.Conv1d on a batch-first sequence, stride 1, output as long as the input:
//   out[b, t, o] = bias[o] + sum_{i, j} w[o, i, j] x[b, t + j dilation - left, i]
// with left = (k - 1) dilation / 2 (rounded down: torch's padding="same") or, causal,
// left = (k - 1) dilation (position t sees only t and the past). Positions outside [0, n) and
// padded positions (valid false) read as 0; the output at a padded position is 0 (no bias).
// One GEMM (B n, k C_in) x (k C_in, C_out) over the gathered taps (im2col), recomputed in
// the backward rather than kept. Deterministic for a given thread count.
// x: (B, n, C_in), w: (C_out, C_in, k), bias: (C_out) or undefined, valid: (B, n) bool or
// undefined -> (B, n, C_out)
int64_t conv1d_left_pad(int64_t k, int64_t dilation, bool causal);
Tensor conv1d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& valid,
                      int64_t dilation, bool causal);
struct Conv1dGrads {
  Tensor dx, dw, dbias;  // dbias undefined when there was no bias
};
// dout: (B, n, C_out), the gradient of conv1d_forward's output
Conv1dGrads conv1d_backward(const Tensor& x, const Tensor& w, bool has_bias, const Tensor& valid,
                            int64_t dilation, bool causal, const Tensor& dout);

}  // namespace qkv
