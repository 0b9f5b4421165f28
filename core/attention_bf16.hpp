// Internal to core/: fused attention (core/fused.hpp) with bfloat16 tile products, the kernel
// attention_forward and attention_backward run in a bf16 PrecisionScope (core/precision.hpp).
//
// The recipe of flash attention in mixed precision: q, k, v (and in the backward dO) are
// rounded to bfloat16 once per call; every tile product (q k^T, P v; in the backward also
// dO v^T, P^T dO, dS k and dS^T q) runs on bf16_tile_product with float32 accumulation. The
// scores, the running max and sum, the output accumulator, the log-sum-exp and every gradient
// accumulator stay float32 (the row statistics double, as in float32); the probabilities P
// and the score gradients dS are rounded to bfloat16 only as operands of the next product.
// Masks, fully masked rows (0 out, -inf lse, 0 gradients) and the split of work over threads
// (so the bits do not depend on the thread count) are those of the float32 kernel.
#pragma once
#include "fused.hpp"
#include "kernel_util.hpp"

namespace qkv::kernel {

// The shapes and the expanded mask of one attention call.
struct AttentionProblem : QKVDims, ScoreMask {};

// q, k, v: float32, unit column stride (blas_rows); out, lse: attention_result_for's.
void attention_forward_bf16(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                            const Tensor& v, float scale, Tensor& out, Tensor& lse);
// out, dout as q; lse contiguous; g: attention_grads_like's, overwritten.
void attention_backward_bf16(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, float scale, AttentionGrads& g);

}  // namespace qkv::kernel
