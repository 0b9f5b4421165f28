// Rotary position embedding (RoPE, Su et al. 2021).
//
// Each pair (x[2i], x[2i+1]) of a query or key row at position p is rotated by the angle
// p * base^(-2i/d), base 10000:
//   y[2i]   = x[2i] cos(a) - x[2i+1] sin(a)
//   y[2i+1] = x[2i] sin(a) + x[2i+1] cos(a)
// A rotation by a and one by b give <R_a q, R_b k> = <q, R_(b-a) k>, so after rotating queries
// at their positions and keys at theirs the scores depend on position only through j - i.
// Nothing is added to the embeddings; the rotation is applied per head, after split_heads.
#pragma once
#include "autograd/ops.hpp"

namespace qkv::nn {

// cos and sin of the angles for positions [offset, offset + n) and d / 2 frequencies: two
// (n, d / 2) tensors of dtype dt (computed in float64). d must be even.
std::pair<Tensor, Tensor> rotary_tables(int64_t n, int64_t d, int64_t offset, DType dt,
                                        double base = 10000.0);

// x: (..., n, d), rows at positions offset .. offset + n - 1 -> (..., n, d), rotated.
// Differentiable in x (one fused op, ag::rotary: one pass forward, one back); d must be even.
ag::Var rotary(const ag::Var& x, int64_t offset = 0, double base = 10000.0);

}  // namespace qkv::nn
