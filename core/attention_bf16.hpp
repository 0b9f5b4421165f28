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

// The row pass both bf16 backends share (core/attention_onednn.hpp).
// The columns [lo, hi) of a key tile of kb keys from k0 that some row of the query tile
// [q0, q0 + qb) of batch entry bi may attend to (mbase: the mask's bytes, null when unmasked;
// lse: the backward's, whose -inf rows are dead and skipped, or null); lo even; lo >= hi: the
// whole tile is masked for these rows.
struct Cols {
  int64_t lo, hi;
};
Cols attended_cols(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t q0,
                   int64_t qb, int64_t k0, int64_t kb, const float* lse);
// One query tile's online softmax over a key tile's raw scores S (qb x w, row stride w, keys
// from kfirst), scaled by sc and masked in place: updates the rows' running max and sum (mrun,
// lrun), rescales acc (qb x dv), and leaves the weights rounded in Pb (qb rows, row stride ldp
// >= even_up(w), a zero after an odd row).
void softmax_tile(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t q0,
                  int64_t qb, int64_t kfirst, int64_t w, float sc, float* S, bf16_t* Pb,
                  int64_t ldp, float* acc, double* mrun, double* lrun);
// Out rows (qb x dv, row stride ldo) and log-sum-exp of a finished query tile, as the float32
// kernel writes them (a row that attended to nothing: 0 and -inf).
void finish_tile(const AttentionProblem& p, int64_t qb, const float* acc, const double* mrun,
                 const double* lrun, float* o, int64_t ldo, float* L);
// The backward's float32 row pass for query row qi over w keys from kfirst: s holds the raw
// scores and becomes P = exp(s sc - l) (0 where masked, all 0 in a dead row: l = -inf); ds
// holds dP and becomes dS = P (dP - di) sc. Each backend rounds them into its own operands.
void softmax_backward_row(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t qi,
                          int64_t kfirst, int64_t w, float sc, float l, float di, float* s,
                          float* ds);

// q, k, v: float32, unit column stride (blas_rows); out, lse: attention_result_for's.
void attention_forward_bf16(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                            const Tensor& v, float scale, Tensor& out, Tensor& lse);
// out, dout as q; lse contiguous; g: attention_grads_like's, overwritten.
void attention_backward_bf16(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, float scale, AttentionGrads& g);

}  // namespace qkv::kernel
