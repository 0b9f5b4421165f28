// Internal to core/: the bf16 tile products of the attention kernels (core/attention_bf16.cpp)
// and the layouts their operands are packed into. Small products (tens to hundreds of rows and
// columns) run here rather than on oneDNN, whose per-call cost exceeds such a tile's work.
//
// A product C (rows, cols) = A (rows, inner) B (inner, cols) reads its inner dimension in
// pairs, as AVX512_BF16's vdpbf16ps does (one float32 lane += a0 b0 + a1 b1):
// - A, "row-major pairs": row r's bfloat16 elements at a + r * lda, the inner dimension padded
//   with a zero to an even length (lda even).
// - B, "pair-interleaved": pair-row p holds, for every column c, the two elements
//   (B[2p][c], B[2p+1][c]) side by side at b + p * ldb + 2 c (ldb even, >= 2 cols); an odd
//   inner dimension's last pair-row has zeros in its second slots.
// Accumulation in float32 in pair order; C float32 with row stride ldc.
#pragma once
#include <cstdint>
#include <vector>

#include "bf16.hpp"

namespace qkv::kernel {

// C = A B (accumulate false) or C += A B; kp: the inner dimension in pairs. One thread.
// AVX512_BF16 where bf16_simd() (core/bf16.hpp), else bf16_tile_product_reference.
void bf16_tile_product(int64_t rows, int64_t cols, int64_t kp, const bf16_t* a, int64_t lda,
                       const bf16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);
// The same product in scalar float32 (each pair's two products added to the lane in order).
void bf16_tile_product_reference(int64_t rows, int64_t cols, int64_t kp, const bf16_t* a,
                                 int64_t lda, const bf16_t* b, int64_t ldb, float* c, int64_t ldc,
                                 bool accumulate);

// Packing from float32 (rows, cols) with row stride lds, each element rounded (bf16_round):
// - as A, row-major pairs: dst row r at dst + r * ldd, cols padded with a zero to even;
void pack_bf16_rows(const float* src, int64_t rows, int64_t cols, int64_t lds, bf16_t* dst,
                    int64_t ldd);
// - its transpose as A: dst row c (of cols rows) holds column c, rows padded with a zero to even;
void pack_bf16_transposed(const float* src, int64_t rows, int64_t cols, int64_t lds, bf16_t* dst,
                          int64_t ldd);
// - as B with the inner dimension along src's rows (B = src): pair-row p from rows 2p, 2p + 1;
void pack_bf16_pairs(const float* src, int64_t rows, int64_t cols, int64_t lds, bf16_t* dst,
                     int64_t ldd);
// - as B with the inner dimension along src's columns (B = src^T): pair-row p from columns
//   2p, 2p + 1 of every row, so column r of B is row r of src.
void pack_bf16_pairs_transposed(const float* src, int64_t rows, int64_t cols, int64_t lds,
                                bf16_t* dst, int64_t ldd);

// The buffer the attention forwards (core/attention_bf16.cpp, attention_onednn.cpp) pack every
// batch entry's operands into ahead of their parallel region, at least n elements, kept by the
// calling thread between calls: apart from workspace() (core/kernel_util.hpp), which the
// region's items use, the calling thread among them.
inline std::vector<bf16_t>& forward_pack_buffer(size_t n) {
  thread_local std::vector<bf16_t> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

// Padded sizes: an even count, and the pair count.
constexpr int64_t even_up(int64_t n) { return n + (n & 1); }
constexpr int64_t pairs_of(int64_t n) { return (n + 1) / 2; }

}  // namespace qkv::kernel
