// Differentiable ops on Var. Each is defined with its backward right beside it, one file per
// family: ops_elementwise.cpp, ops_reduce.cpp, ops_view.cpp, ops_linalg.cpp, ops_index.cpp,
// ops_activation.cpp, ops_norm.cpp, ops_loss.cpp.
//
// Binary ops broadcast like NumPy; their backward sums the gradient back to each input's
// shape. Masks are bool (b8) Tensors, never differentiated.
#pragma once
#include "autograd/var.hpp"
#include "core/fused.hpp"
#include "core/random.hpp"

namespace qkv::ag {

// Constants enter graphs as Vars that don't require grad.
inline Var constant(const Tensor& t) { return Var(t, false); }
inline Var param(const Tensor& t) { return Var(t, true); }

// --- elementwise (ops_elementwise.cpp) ---
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);
Var maximum(const Var& a, const Var& b);  // ties send the gradient to a
Var add(const Var& a, double s);
Var mul(const Var& a, double s);
Var pow(const Var& a, double e);
Var rsub(double s, const Var& a);  // s - a
Var neg(const Var& a);
Var exp(const Var& a);
Var log(const Var& a);
Var sqrt(const Var& a);
Var rsqrt(const Var& a);
Var abs(const Var& a);
// where(cond, a, b): a where cond is true, else b; no gradient reaches the unselected side.
Var where(const Tensor& cond, const Var& a, const Var& b);
// masked_fill(x, mask, v): v where mask is true; those positions get no gradient.
Var masked_fill(const Var& x, const Tensor& mask, double value);

// --- activations (ops_activation.cpp) ---
Var relu(const Var& x);
// relu(x)^2, fused: one pass forward keeping relu(x), one back (dx = 2 relu(x) g).
Var relu_squared(const Var& x);
Var gelu(const Var& x);  // exact (erf) GELU, as torch's default
Var tanh(const Var& x);
Var sigmoid(const Var& x);
Var elu(const Var& x, double alpha = 1.0);
Var softmax(const Var& x, int64_t d);  // an all -inf row gives zeros, zero gradient
Var log_softmax(const Var& x, int64_t d);
// Inverted dropout: zeroes each element with probability p and scales the rest by 1/(1-p);
// the mask is kept for backward. Identity when p == 0. Needs a generator for the mask.
Var dropout(const Var& x, double p, Generator& gen);

// --- reductions (ops_reduce.cpp) ---
Var sum(const Var& x, const Shape& dims = {}, bool keepdim = false);
Var mean(const Var& x, const Shape& dims = {}, bool keepdim = false);
// Max over dims; the gradient goes to the first maximal element of each reduced block
// (lowest flat index), so ties are handled deterministically.
Var max(const Var& x, const Shape& dims = {}, bool keepdim = false);
Var var(const Var& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);

// --- views and shape (ops_view.cpp) ---
Var reshape(const Var& x, const Shape& s);
Var transpose(const Var& x, int64_t d0, int64_t d1);
Var permute(const Var& x, const Shape& dims);
Var slice(const Var& x, int64_t d, int64_t start, int64_t end, int64_t step = 1);
Var narrow(const Var& x, int64_t d, int64_t start, int64_t length);
Var select(const Var& x, int64_t d, int64_t index);
Var expand(const Var& x, const Shape& s);
Var unsqueeze(const Var& x, int64_t d);
Var squeeze(const Var& x, int64_t d);
Var contiguous(const Var& x);
Var concat(const std::vector<Var>& xs, int64_t d);
Var stack(const std::vector<Var>& xs, int64_t d);
std::vector<Var> split(const Var& x, const Shape& sizes, int64_t d);
std::vector<Var> chunk(const Var& x, int64_t n, int64_t d);

// --- linear algebra (ops_linalg.cpp) ---
// a: (..., n, k), b: (..., k, m) -> (..., n, m); batch dims broadcast.
Var matmul(const Var& a, const Var& b);
// x: (..., in), w: (out, in), b: (out) or undefined -> (..., out): x w^T + b, as torch's
// F.linear. One GEMM over all leading dims.
Var linear(const Var& x, const Var& w, const Var& b = Var());

// act(linear(x, w, b)) as one op, for ReLU and the exact GELU (core/fused.hpp's
// linear_act_forward): in a bf16 scope the activation runs in the product's epilogue and the
// backward's activation gradient and its rounding to bf16 in one pass; the composed ops' bits
// either way. x: (..., in), w: (out, in), b: (out) or undefined -> (..., out).
Var linear_act(const Var& x, const Var& w, const Var& b, LinearAct act);

// --- fused attention and rotary positions (ops_attention.cpp) ---
// softmax(q k^T * scale with masked scores at -inf) v, never forming the (n, m) weights:
// q: (..., n, d_k), k: (..., m, d_k), v: (..., m, d_v), one batch shape; mask bool,
// broadcastable to (..., n, m), true = may attend, or undefined. A fully masked query row
// gives zeros and zero gradients. Equal to the composed ops to float rounding.
Var attention(const Var& q, const Var& k, const Var& v, const Tensor& mask, double scale);
// Rotary positions, fused (core/rotary.cpp): x: (..., n, d), each pair (x[2i], x[2i+1]) of
// the row at index p of dim -2 turned by the angle whose cos and sin are row p, column i of
// cos, sin: (n, d/2) tables (nn::rotary_tables), constants. -> (..., n, d).
Var rotary(const Var& x, const Tensor& cos, const Tensor& sin);

// --- attention variants (ops_attention_variants.cpp, kernels in core/attention_variants.hpp) ---
// Sliding-window attention: as attention, but query i (at key position p = i + m - n) sees
// only keys with |p - j| <= window (causal: 0 <= p - j <= window), AND mask. O(n window).
Var local_attention(const Var& q, const Var& k, const Var& v, const Tensor& mask, double scale,
                    int64_t window, bool causal);
// Linear attention from feature maps fq: (..., n, d), fk: (..., m, d) (>= 0; zero rows for
// padded keys), v: (..., m, d_v): out_i = fq_i^T sum_j fk_j v_j^T / (fq_i . sum_j fk_j), over
// every key, or with causal over keys j <= i + m - n. A row with a zero denominator gives 0.
Var linear_attention(const Var& fq, const Var& fk, const Var& v, bool causal);

// --- recurrences and the 1-D convolution (ops_recurrent.cpp, kernels in core/recurrent.hpp) ---
// One layer of one direction of torch.nn.GRU / LSTM (gate order r, z, n / i, f, g, o; weights
// w_ih: (G H, d), w_hh: (G H, H), b_ih, b_hh: (G H), G = 3 or 4), batch-first, as ONE op on the
// tape whose backward through time is written out (core/recurrent.cpp) rather than n steps of
// small ops: forward + backward of B 32, n 64, d = H 128 took 40 ms (GRU) and 65 ms (LSTM) on
// one thread of a 2-core AMD EPYC, the unrolled tape 85 and 142 ms; on two threads (of a loaded
// machine) the unrolled tape took 4x the op's time (tests/autograd/bench_recurrent.cpp's table).
// x: (B, n, d); valid: (B, n) bool (true = real) or undefined; h0, c0: (B, H) or undefined
// (zeros). A padded position is skipped: the state passes through it, its output is 0 (torch's
// packed sequences when valid is a prefix mask, in both directions).
struct RecurrentOut {
  Var out;   // (B, n, H): h_t at real positions, 0 at padded ones
  Var h, c;  // (B, H): the final states (after each row's last real step); c: LSTM only
};
RecurrentOut gru(const Var& x, const Tensor& valid, const Var& h0, const Var& w_ih, const Var& w_hh,
                 const Var& b_ih, const Var& b_hh, bool reverse = false);
RecurrentOut lstm(const Var& x, const Tensor& valid, const Var& h0, const Var& c0, const Var& w_ih,
                  const Var& w_hh, const Var& b_ih, const Var& b_hh, bool reverse = false);
// torch.nn.Conv1d over positions, batch-first, stride 1, as long as the input ("same"
// padding, or causal: left padding only). x: (B, n, C_in), w: (C_out, C_in, k), b: (C_out) or
// undefined, valid: (B, n) bool or undefined (padded positions read as 0, output 0)
// -> (B, n, C_out).
Var conv1d(const Var& x, const Var& w, const Var& b, const Tensor& valid, int64_t dilation = 1,
           bool causal = false);

// --- indexing (ops_index.cpp) ---
// index_select(x, d, idx): idx 1-d int64. Backward scatter-adds; repeated indices accumulate.
Var index_select(const Var& x, int64_t d, const Tensor& idx);
// gather(x, d, idx): idx has x's rank. Backward scatter-adds.
Var gather(const Var& x, int64_t d, const Tensor& idx);
// embedding(weight, ids): weight (V, D), ids int64 of any shape -> (ids..., D).
Var embedding(const Var& weight, const Tensor& ids);

// --- normalization (ops_norm.cpp) ---
// LayerNorm over the last dim: (x - mean) / sqrt(var_biased + eps) * gamma + beta, fused.
// gamma, beta: (D) or undefined.
Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps = 1e-5);
// RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * gamma (gamma undefined: no gain),
// composed of the ops above. x: (..., d), gamma: (d).
Var rms_norm(const Var& x, const Var& gamma, double eps = 1e-6);
// A residual add and the norm after it, one pass over memory (core/fused.hpp): layer_norm(x + a,
// gamma, beta, eps) and rms_norm(x + a, gamma, eps), with the composed ops' values and gradients
// bit for bit. x, a: (..., d), one shape (otherwise the composed ops run). sum: when given, it
// receives x + a, the residual stream that flows on (pre-LN), and the tape holds add and the
// norm as the composed ops do. Without it (post-LN: only the norm reads x + a) one op, whose
// backward in a bf16 scope rounds dx in its pass for the product behind a.
Var add_layer_norm(const Var& x, const Var& a, const Var& gamma, const Var& beta, double eps,
                   Var* sum = nullptr);
Var add_rms_norm(const Var& x, const Var& a, const Var& gamma, double eps, Var* sum = nullptr);

// --- losses (ops_loss.cpp) ---
// Cross-entropy of logits (N, C) against int64 targets (N), fused log-softmax + NLL, mean over
// targets != ignore_index, with label smoothing as torch.nn.functional.cross_entropy.
// All targets ignored gives 0 (torch gives NaN) with zero gradient.
Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index = -100,
                  double label_smoothing = 0.0);
// cross_entropy(linear(x, w, b) as (N, V), targets): an output layer and its loss. x: (..., d)
// with N rows, w: (V, d), b: (V) or undefined, targets: (N). In a bf16 PrecisionScope with
// float32 inputs, one op that never forms the (N, V) float32 logits (core/fused.hpp's
// linear_cross_entropy_forward: the gradient is formed in the forward, in bfloat16);
// otherwise exactly the two ops, with their bits.
Var linear_cross_entropy(const Var& x, const Var& w, const Var& b, const Tensor& targets,
                         int64_t ignore_index = -100, double label_smoothing = 0.0);
Var mse_loss(const Var& x, const Var& y);  // mean of squared differences

// --- operators ---
inline Var operator+(const Var& a, const Var& b) { return add(a, b); }
inline Var operator-(const Var& a, const Var& b) { return sub(a, b); }
inline Var operator*(const Var& a, const Var& b) { return mul(a, b); }
inline Var operator/(const Var& a, const Var& b) { return div(a, b); }
inline Var operator-(const Var& a) { return neg(a); }
inline Var operator+(const Var& a, double s) { return add(a, s); }
inline Var operator-(const Var& a, double s) { return add(a, -s); }
inline Var operator*(const Var& a, double s) { return mul(a, s); }
inline Var operator/(const Var& a, double s) { return mul(a, 1.0 / s); }
inline Var operator+(double s, const Var& a) { return add(a, s); }
inline Var operator-(double s, const Var& a) { return rsub(s, a); }
inline Var operator*(double s, const Var& a) { return mul(a, s); }

}  // namespace qkv::ag
