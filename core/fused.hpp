// Fused kernels: one pass (or one tiled sweep) where the plain ops would make several, for
// the hot paths of Transformer training. Each has a plain-op equivalent it is tested against.
#pragma once
#include <cstdint>
#include <vector>

#include "precision.hpp"
#include "tensor.hpp"

namespace qkv {

// --- attention without the n x m matrix (core/attention.cpp) ---
//
// Scaled dot-product attention computed tile by tile with an online softmax, so no (n, m)
// scores or weights tensor is ever allocated: memory is O(n) per head instead of O(n m).
// q: (..., n, dk), k: (..., m, dk), v: (..., m, dv), one batch shape "..." for all three.
// mask: undefined (attend everywhere) or bool broadcastable to (..., n, m), true = may attend.
// A query row whose keys are all masked gives a zero output row and zero gradients.
// Deterministic: each output row is reduced over key tiles in a fixed order by one thread.
// Precision: float32 inputs in a bf16 PrecisionScope (core/precision.hpp) run the tile products
// in bfloat16 with float32 statistics and results (core/attention_bf16.hpp); otherwise, and
// for float64, every product is in the inputs' dtype on BLAS.
struct AttentionResult {
  Tensor out;  // (..., n, dv); for 4-d inputs laid out (B, n, H, dv) so merging heads is a view
  Tensor lse;  // (..., n): log-sum-exp of each row's scaled, masked scores (-inf: fully masked)
  Precision precision = Precision::fp32;  // the products': pass it on to attention_backward
};
AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, double scale);

struct AttentionGrads {
  Tensor dq, dk, dv;  // shapes of q, k, v
};
// Recomputes each tile's weights from q, k and lse instead of storing them. precision: the
// forward's (AttentionResult::precision), whichever scope the backward runs in.
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, double scale, const Tensor& out,
                                  const Tensor& lse, const Tensor& dout,
                                  Precision precision = Precision::fp32);

// --- linear layers (core/matmul.cpp, core/reduce.cpp) ---
// x: (N, in), w: (out, in), b: (out) or undefined -> (N, out) = x w^T + b: each thread writes
// the bias into its band of rows and its GEMM adds onto it (no parallel region for the bias).
// In bf16 (core/precision.hpp) the product takes bfloat16 operands on oneDNN, with w's copy
// rounded once per PrecisionScope; float32 accumulation, result and bias either way.
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b);
// The backward's products in the same precision: g: (N, out), w: (out, in) -> dx = g w (N, in);
// g: (N, out), x: (N, in) -> dW = g^T x (out, in). In fp32: matmul(g, w) and matmul(g.t(), x).
Tensor linear_input_grad(const Tensor& g, const Tensor& w);
Tensor linear_weight_grad(const Tensor& g, const Tensor& x);
// x: (N, C) -> (C): the sum of the rows (a bias gradient), each column accumulated in double
// in row order, so the result does not depend on the thread count.
Tensor sum_rows(const Tensor& x);
// x, y: (N, C) -> (C): sum over rows of x * y (a LayerNorm gain gradient), as sum_rows.
Tensor sum_rows_product(const Tensor& x, const Tensor& y);

// --- a linear layer and its activation, fused (core/linear_act.cpp) ---
// act(x w^T + b) for ReLU or the exact GELU. In bf16 (float32 inputs in a bf16 PrecisionScope)
// the activation runs in the product's epilogue (kernel::gemm_bf16's: on each band of rows as
// its thread finishes it, no pass or parallel region of its own) and in the same pass writes y's
// bfloat16 copy for the next product that reads y (core/bf16_cache.hpp); otherwise it is
// linear_forward then relu or gelu_forward. Either way the bits of those composed ops.
enum class LinearAct { relu, gelu };
struct LinearActResult {
  Tensor y;    // (N, out), contiguous: act(pre)
  Tensor pre;  // (N, out): x w^T + b; GELU only (ReLU's backward reads y)
  Tensor cdf;  // (N, out): Phi(pre); GELU only
};
// x: (N, in), w: (out, in), b: (out) or undefined, one float dtype
LinearActResult linear_act_forward(const Tensor& x, const Tensor& w, const Tensor& b,
                                   LinearAct act);
// g: (N, out) = dL/dy, f: the forward's -> dL/dpre (N, out): relu_backward(f.y, g) or
// gelu_backward(g, f.pre, f.cdf), with their bits. In bf16, in the same pass, its bfloat16 copy
// for the layer's two backward products (dx = d w, dW = d^T x).
Tensor linear_act_backward(const Tensor& g, const LinearActResult& f, LinearAct act);

// --- LayerNorm (core/layer_norm.cpp) ---
// Over the last dim d of x, rows = numel / d; statistics in double, one pass per row, rows
// split across threads (each row's result does not depend on the thread count).
struct LayerNormResult {
  Tensor y;     // x's shape: xhat * gamma + beta (xhat itself when neither is given)
  Tensor xhat;  // x's shape: (x - mean) * rstd, kept for the backward
  Tensor rstd;  // (rows): 1 / sqrt(var + eps), the biased variance as torch
};
// x: (..., d), gamma: (d) or undefined, beta: (d) or undefined, all one float dtype
LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   double eps);
// g: (..., d) = dL/dy, gamma: (d) or undefined, xhat, rstd: the forward's -> dL/dx (..., d):
// rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * gamma. The gradients
// of gamma and beta are sum_rows_product(g, xhat) and sum_rows(g) on (rows, d) views.
Tensor layer_norm_backward(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                           const Tensor& rstd);

// --- RMSNorm (core/layer_norm.cpp) ---
// LayerNorm without the centering, as LayerNorm: xhat = x * rstd, rstd = 1 / sqrt(mean(x^2) +
// eps) (eps > 0), y = xhat * gamma (xhat itself when gamma is undefined).
// x: (..., d), gamma: (d) or undefined
LayerNormResult rms_norm_forward(const Tensor& x, const Tensor& gamma, double eps);
// g: (..., d) = dL/dy -> dL/dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), dxhat = g * gamma;
// gamma's gradient is sum_rows_product(g, xhat) on (rows, d) views.
Tensor rms_norm_backward(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                         const Tensor& rstd);

// --- a residual add and the norm after it (core/layer_norm.cpp) ---
// s = x + a, then LayerNorm of s (centered) or RMSNorm (not; beta undefined), one pass per row
// with the bits of add then layer_norm_forward / rms_norm_forward. The residual stream's add
// and the norm that reads it: s is not written out and read back, and in a bf16 PrecisionScope
// the norm's output gets its bfloat16 copy in the same pass, for the product that reads it next
// (core/bf16_cache.hpp).
struct AddNormResult {
  LayerNormResult norm;  // the norm of s
  Tensor sum;            // s (x's shape) when keep_sum, else undefined (only the norm reads s)
};
// x, a: (..., d) one shape and float dtype; gamma, beta: (d) or undefined
AddNormResult add_norm_forward(const Tensor& x, const Tensor& a, const Tensor& gamma,
                               const Tensor& beta, double eps, bool centered, bool keep_sum);
// layer_norm_backward (centered) or rms_norm_backward with their bits, and in a bf16 scope dx's
// bfloat16 copy in the same pass: for a dx that flows on to a product's output (a post-LN
// sublayer's last linear layer), whose backward products read it rounded.
Tensor norm_backward_rounded(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                             const Tensor& rstd, bool centered);

// --- rotary positions (core/rotary.cpp) ---
// Each pair (x[2i], x[2i+1]) of a row at position p turned by the angle a of (p, i), in one pass
// over x instead of the slices, products, sums and stack of the composed op (nn/rotary.hpp):
//   out[2i] = x[2i] cos a - x[2i+1] sin a,  out[2i+1] = x[2i] sin a + x[2i+1] cos a.
// Every product is rounded before the sum, never fused into an FMA, so the bits are the
// composed op's. Rows split across threads.
// x: (..., n, d) any strides, d even; cos, sin: (n, d/2) of x's dtype (float32 or float64), row
// p for x's rows at index p of dim -2 -> (..., n, d), contiguous.
Tensor rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin);
// The backward is the rotation by -a (a rotation's inverse is its transpose): g: (..., n, d)
// any strides -> dL/dx (..., n, d), contiguous:
//   dx[2i] = g[2i] cos a + g[2i+1] sin a,  dx[2i+1] = g[2i+1] cos a - g[2i] sin a.
// The composed op's gradient values (it summed its two slices' zero-padded gradients, so where
// this gives -0 it gave +0).
Tensor rotary_backward(const Tensor& g, const Tensor& cos, const Tensor& sin);

// --- cross-entropy over classes (core/cross_entropy.cpp) ---
// log-softmax and NLL fused: the gradient is softmax minus the (smoothed) target distribution
// q = (1 - eps) onehot(t) + eps / C. The log-probabilities are never stored: each row's max and
// log-sum-exp are kept beside the logits and the backward recomputes a row's log-probabilities
// from them, with log_softmax's bits (core/softmax.cpp): the only (N, C) tensor it writes is
// the gradient (a stored log-probability tensor was 64 MB of Multi30k's step, 2688 x 6000).
struct CrossEntropyResult {
  double loss = 0;               // mean over the rows whose target is not ignore_index (0: none)
  Tensor logits;                 // (N, C), contiguous: the input (a copy only if it was strided)
  Tensor row_max, row_log_sum;   // (N), logits' dtype: max_j x_j, log sum_j exp(x_j - max)
  std::vector<int64_t> targets;  // (N), a copy: the caller may reuse its tensor
  int64_t ignore_index = -100, count = 0;  // count: rows that are not ignored
  double label_smoothing = 0;
};
// logits: (N, C) float, targets: (N) int64 in [0, C) or ignore_index; label_smoothing in [0, 1].
// Rows are summed in order, so the loss does not depend on the thread count.
CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                         int64_t ignore_index, double label_smoothing);
// -> dL/dlogits (N, C) for dL/dloss = g: g / count * (softmax - q), zero rows where ignored.
Tensor cross_entropy_backward(const CrossEntropyResult& f, double g);
namespace detail {
// How many of targets t are not ignore_index; qkv::Error from op when one is outside [0,
// classes): "target T at row I out of range [0, C) for <what> <shape>". Shared by both losses.
int64_t count_targets(const std::vector<int64_t>& t, int64_t ignore_index, int64_t classes,
                      const char* op, const char* what, const Shape& shape);
}  // namespace detail

// --- the output layer and its cross-entropy in one op, bf16 (core/linear_cross_entropy.cpp) ---
// loss = cross_entropy(x w^T + b, targets) without the (N, V) float32 logits, for float32
// inputs in a bf16 PrecisionScope (the caller composes linear_forward and cross_entropy_forward
// otherwise: ag::linear_cross_entropy). x's rows are taken kLinearCrossEntropyChunk at a time,
// each chunk by one thread: its logits, a bf16 product into the thread's scratch, then its
// rows' losses and gradient rows, rounded to bfloat16, so the backward is two bf16 products
// over the gradient and a column sum. Each logit is read back from cache, not memory, and
// exponentiated once (the unfused step wrote 64 MB of Multi30k logits, read them twice and
// wrote and rounded a 64 MB gradient). Chunks do not depend on the thread count, nor do the
// bits of the loss and of dlogits; the backward's products are bf16 products as any other
// (the same bits at any thread count under ThreadInvariantProducts).
inline constexpr int64_t kLinearCrossEntropyChunk = 128;
struct LinearCrossEntropyResult {
  double loss = 0;    // mean over the rows whose target is not ignore_index (0: none)
  int64_t count = 0;  // rows that are not ignored
  Tensor x, w;        // x (N, d) contiguous and w (V, d): the backward's operands
  // (N, V) bfloat16 (with_grad only): (softmax - q) / count per row, q the smoothed target
  // distribution as cross_entropy_backward's; zero rows where ignored
  std::shared_ptr<Storage> dlogits;
  Tensor bias_grad;  // (V) float32, with a bias and with_grad: the column sums before rounding
};
// x: (N, d), w: (V, d), b: (V) or undefined, all float32; targets: (N) int64 in [0, V) or
// ignore_index. with_grad: also form the gradient (for a backward).
LinearCrossEntropyResult linear_cross_entropy_forward(const Tensor& x, const Tensor& w,
                                                      const Tensor& b, const Tensor& targets,
                                                      int64_t ignore_index, double label_smoothing,
                                                      bool with_grad);
// For dL/dloss = g: dx = g dlogits w (N, d), dw = g dlogits^T x (V, d), db = g bias_grad (V);
// each formed only when asked (need_*), else undefined. In a bf16 PrecisionScope or not.
struct LinearCrossEntropyGrads {
  Tensor dx, dw, db;
};
LinearCrossEntropyGrads linear_cross_entropy_backward(const LinearCrossEntropyResult& f, double g,
                                                      bool need_dx, bool need_dw, bool need_db);

// --- activations (core/elementwise.cpp) ---
// g where y > 0, else 0: relu's backward from its output (y = relu(x) > 0 exactly when x > 0).
Tensor relu_backward(const Tensor& y, const Tensor& g);

// ReLU squared, y = relu(x)^2 (the "relu2" feed-forward), in one pass instead of relu then a
// multiply, with r = relu(x) kept: the backward, 2 r g, needs only r, so x can be freed.
// Same bits as mul(r, r) and as relu_backward(r, g r + g r), the composed backward (2 (g r)
// equals g r + g r exactly).
struct ReluSquaredResult {
  Tensor y;  // x's shape, contiguous: r * r
  Tensor r;  // x's shape, contiguous: relu(x); undefined unless asked for
};
// x: any shape, float32 or float64. keep_relu: also write r (only a backward needs it).
ReluSquaredResult relu_squared_forward(const Tensor& x, bool keep_relu = true);
// g, r: one shape and dtype (r: the forward's) -> dL/dx = 2 (g r) where r > 0, else 0
Tensor relu_squared_backward(const Tensor& g, const Tensor& r);

// The exact GELU, y = x Phi(x), with Phi(x) kept: Phi is the costly part (a division and an
// exp), and with it the backward needs only the density, phi(x) (one exp), in one pass with
// the multiply by g, instead of recomputing Phi and then multiplying (two passes).
// Same bits as gelu(x) and mul(g, gelu_grad(x)) (both use kernel::mul_add).
struct GeluResult {
  Tensor y;    // x's shape, contiguous
  Tensor cdf;  // x's shape, contiguous: Phi(x)
};
// x: any shape, float32 or float64
GeluResult gelu_forward(const Tensor& x);
// g, x, cdf: one shape and dtype (cdf: the forward's) -> dL/dx = g (Phi(x) + x phi(x))
Tensor gelu_backward(const Tensor& g, const Tensor& x, const Tensor& cdf);

}  // namespace qkv
