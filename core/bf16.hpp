// bfloat16: the upper half of a float32 (1 sign, 8 exponent, 7 mantissa bits), stored as uint16_t.
//
// Rounding is round-to-nearest-even with the semantics of AVX512_BF16's vcvtne2ps2bf16, which
// the vector path uses: NaN stays NaN (quieted: the payload's upper bits with the quiet bit set),
// +-Inf stays +-Inf, a finite value that rounds past the largest bf16 becomes +-Inf, and a
// float32 subnormal input becomes a zero of the same sign (the instruction treats denormal
// inputs as zero). The scalar reference gives the same bits, so a tail handled by it matches
// the vector body.
#pragma once
#include <bit>
#include <cstdint>

namespace qkv {

using bf16_t = uint16_t;

// The reference: one float32 to bfloat16, as above.
constexpr bf16_t bf16_round(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t exp = x & 0x7f800000u, man = x & 0x007fffffu;
  if (exp == 0x7f800000u && man != 0) return static_cast<bf16_t>((x >> 16) | 0x0040u);  // NaN
  if (exp == 0) x &= 0x80000000u;   // subnormal (or zero): a signed zero
  x += 0x7fffu + ((x >> 16) & 1u);  // ties to even
  return static_cast<bf16_t>(x >> 16);
}

// Exact: a bfloat16 is a float32 whose low 16 bits are zero.
constexpr float bf16_to_float(bf16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// src (n) -> dst (n), the same bits as bf16_round on each element; vectorized with AVX512_BF16
// (32 lanes a step) where bf16_simd(), the reference otherwise. One thread.
void to_bf16(const float* src, bf16_t* dst, int64_t n);

// rows x cols floats read with row stride ld (>= cols) -> a packed (rows, cols) bfloat16 copy in
// dst; split over threads by rows when large (each element is rounded alone: any split gives
// the same bits).
void to_bf16_rows(const float* src, int64_t rows, int64_t cols, int64_t ld, bf16_t* dst);

// Whether qkv's own bf16 kernels (to_bf16, the attention tiles of core/bf16_tile.hpp) run
// AVX512_BF16 instructions: the CPU has them (cpuid) and ONEDNN_MAX_CPU_ISA does not cap oneDNN
// below avx512_core_bf16. The cap thus stands in for a CPU without them for qkv's kernels as
// for oneDNN's. Otherwise the scalar references run, with the same bits for to_bf16. Whatever
// the build's -march: the vector bodies are compiled for AVX512_BF16 in every x86-64 build and
// chosen at run time.
bool bf16_simd();

}  // namespace qkv
