// oneDNN, the GEMM backend of bf16 products (core/precision.hpp). Internal to core/ except for
// the descriptions the bench prints.
//
// Threads: Debian's oneDNN is built with the OpenMP runtime, so a primitive executed outside a
// parallel region runs on qkv's OpenMP pool (get_num_threads() threads), as OpenBLAS does.
// Primitives are created once per shape, transposes, leading dims and thread count, cached per
// calling thread with their own scratchpad, and reused: a steady step allocates nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "bf16.hpp"

namespace qkv {

std::string onednn_version();  // "2.6.3 (commit ...)"
// The instruction set oneDNN's kernels use here, after ONEDNN_MAX_CPU_ISA: "avx512_core_bf16", ...
std::string onednn_isa();
// Whether that ISA includes AVX512_BF16 (oneDNN's avx512_core_bf16 or above).
bool onednn_isa_has_bf16();
// Whether the CPU itself has AVX512_BF16 (cpuid).
bool cpu_has_avx512_bf16();

namespace kernel {

// c (n, m) = op(a) (n, k) op(b) (k, m) [+ bias (m) on every row], row-major, bfloat16 operands,
// float32 accumulation and result; op transposes when ta / tb; lda, ldb, ldc: the row strides
// of the stored matrices. Must be called outside a parallel region (throws qkv::Error there).
// Deterministic: a given primitive splits the work the same way on every call. Under
// ThreadInvariantProducts (core/parallel.hpp): bands fixed by the shape, one thread each, the
// same bits at any thread count.
void gemm_bf16(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a, int64_t lda,
               const bf16_t* b, int64_t ldb, float* c, int64_t ldc, const float* bias);

// An epilogue: elementwise work on C's rows r0..r1, columns c0..c1 right after they are
// computed, on the thread that computed them (while they are in its cache). Serial code: it may
// run inside a parallel region, once per band; the rectangles of one product are disjoint and
// cover C.
using GemmEpilogue = std::function<void(int64_t r0, int64_t r1, int64_t c0, int64_t c1)>;
// gemm_bf16, then epilogue on every band of C as it is done (a product not cut into bands: on
// row blocks of C across the threads, after it). The product's bits are gemm_bf16's.
void gemm_bf16(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a, int64_t lda,
               const bf16_t* b, int64_t ldb, float* c, int64_t ldc, const float* bias,
               const GemmEpilogue& epilogue);

// The same product on the calling thread alone, with a primitive planned for one thread (its
// bits do not depend on the thread count); callable inside a parallel region, where each
// thread runs products of its own (core/linear_cross_entropy.cpp's chunks).
void gemm_bf16_this_thread(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a,
                           int64_t lda, const bf16_t* b, int64_t ldb, float* c, int64_t ldc,
                           const float* bias);

}  // namespace kernel
}  // namespace qkv
