// Internal to core/: fused attention in bf16 with its tile products on oneDNN's matmul
// primitives (core/onednn_matmul.hpp), the kernel attention_forward and attention_backward run
// in a bf16 PrecisionScope when the attention backend is onednn (core/attention_backend.hpp).
//
// The algorithm and the rounding points of the tile kernel (core/attention_bf16.hpp): q, k, v
// (and dO) rounded to bfloat16 once per call; S = q k^T and acc += P v forward, S, dP = dO v^T,
// dV += P^T dO, dK += dS^T q and dQ += dS k backward, each a oneDNN bf16 matmul with float32
// accumulation on one thread; the online softmax, the statistics and every accumulator float32;
// P and dS rounded only as operands. Its blocks are larger than the tile kernel's, to amortise a
// primitive call, and the columns a mask leaves are widened to multiples of 32 keys (the extra
// ones are masked, so add exact zeros), which bounds the shapes planned to a few dozen. Work is
// split into items that own their outputs (forward: batch entry and query block; backward:
// batch entry), so the bits do not depend on the thread count.
#pragma once
#include "attention_bf16.hpp"

namespace qkv::kernel {

// Query rows and keys per block, forward and backward. Process-wide; set only while no
// attention runs (bench_attention_bf16 measures them).
struct OnednnAttentionBlocks {
  int64_t fq = 128, fk = 512, bq = 128, bk = 256;
};
OnednnAttentionBlocks& onednn_attention_blocks();

// As attention_forward_bf16 and attention_backward_bf16 (core/attention_bf16.hpp). Throw
// qkv::Error where oneDNN has no bf16 matmul (ONEDNN_MAX_CPU_ISA below AVX512_CORE).
void attention_forward_onednn(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                              const Tensor& v, float scale, Tensor& out, Tensor& lse);
void attention_backward_onednn(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& out, const Tensor& lse,
                               const Tensor& dout, float scale, AttentionGrads& g);

}  // namespace qkv::kernel
