#include "bf16.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "onednn.hpp"
#include "parallel.hpp"

namespace qkv {

bool bf16_simd() {
  // Decided once: the CPU's own answer and oneDNN's cap do not change within a process.
  static const bool on = cpu_has_avx512_bf16() && onednn_isa_has_bf16();
  return on;
}

#if defined(__x86_64__)
// The AVX512_BF16 bodies are compiled for those instructions whatever the build targets (a
// portable build's -march=x86-64-v2 included) and run only where bf16_simd() says the CPU has
// them, so one binary is fast on a bf16 CPU and never meets an unknown instruction elsewhere.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
namespace {

void to_bf16_avx512(const float* src, bf16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    const __m512bh h = _mm512_cvtne2ps_pbh(hi, lo);  // lanes 0..15 from lo, 16..31 from hi
    _mm512_storeu_si512(dst + i, reinterpret_cast<__m512i>(h));
  }
  if (i + 16 <= n) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), reinterpret_cast<__m256i>(h));
    i += 16;
  }
  if (i < n) {  // the last 1-15 under a mask: short rows (attention's tiles) stay vectorized
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, reinterpret_cast<__m256i>(h));
  }
}

}  // namespace
#pragma GCC pop_options
#endif

void to_bf16(const float* src, bf16_t* dst, int64_t n) {
#if defined(__x86_64__)
  if (bf16_simd()) return to_bf16_avx512(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_round(src[i]);
}

void to_bf16_rows(const float* src, int64_t rows, int64_t cols, int64_t ld, bf16_t* dst) {
  if (ld == cols) {  // one stream, split into 32-aligned chunks
    const int64_t n = rows * cols, chunks = (n + 1023) / 1024;
    parallel_for(chunks, 1024, [&](int64_t lo, int64_t hi) {
      const int64_t a = lo * 1024, b = std::min(hi * 1024, n);
      to_bf16(src + a, dst + a, b - a);
    });
    return;
  }
  parallel_for(rows, cols, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) to_bf16(src + r * ld, dst + r * cols, cols);
  });
}

}  // namespace qkv
