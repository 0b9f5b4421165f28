// Fused kernels: one pass (or one tiled sweep) where the plain ops would make several, for
// the hot paths of Transformer training. Each has a plain-op equivalent it is tested against.
#pragma once
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
struct AttentionResult {
  Tensor out;  // (..., n, dv); for 4-d inputs laid out (B, n, H, dv) so merging heads is a view
  Tensor lse;  // (..., n): log-sum-exp of each row's scaled, masked scores (-inf: fully masked)
};
AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, double scale);

struct AttentionGrads {
  Tensor dq, dk, dv;  // shapes of q, k, v
};
// Recomputes each tile's weights from q, k and lse instead of storing them.
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, double scale, const Tensor& out,
                                  const Tensor& lse, const Tensor& dout);

// --- linear layers (core/matmul.cpp, core/reduce.cpp) ---
// x: (N, in), w: (out, in), b: (out) or undefined -> (N, out) = x w^T + b: each thread writes
// the bias into its band of rows and its GEMM adds onto it (no parallel region for the bias).
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b);
// x: (N, C) -> (C): the sum of the rows (a bias gradient), each column accumulated in double
// in row order, so the result does not depend on the thread count.
Tensor sum_rows(const Tensor& x);
// x, y: (N, C) -> (C): sum over rows of x * y (a LayerNorm gain gradient), as sum_rows.
Tensor sum_rows_product(const Tensor& x, const Tensor& y);

// --- activations (core/elementwise.cpp) ---
// g where y > 0, else 0: relu's backward from its output (y = relu(x) > 0 exactly when x > 0).
Tensor relu_backward(const Tensor& y, const Tensor& g);

}  // namespace qkv
