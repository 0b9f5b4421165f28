#include "bf16_tile.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

namespace qkv::kernel {

#if defined(__x86_64__)
// Compiled for AVX512_BF16 in every x86-64 build, run where bf16_simd() (core/bf16.hpp).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
namespace {

// A register block: R rows of C by NV vectors of 16 columns (masks for the last vector's
// columns), over all kp pairs. R * NV accumulators, NV B vectors and a broadcast: <= 29 zmm.
// 32 bits read as one pair of bfloat16s (may alias the bf16 array).
typedef int32_t pair_bits __attribute__((may_alias, aligned(2)));

template <int R, int NV>
__attribute__((always_inline)) inline void block(int64_t kp, const bf16_t* a, int64_t lda,
                                                 const bf16_t* b, int64_t ldb, float* c,
                                                 int64_t ldc, const __mmask16* mask,
                                                 bool accumulate) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] =
          accumulate ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();
  const bf16_t* arow[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) arow[r] = a + r * lda;
  for (int64_t p = 0; p < kp; ++p, b += ldb) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)  // 16 pairs: 16 columns
      bv[v] = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi32(mask[v], b + 32 * v));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh av = reinterpret_cast<__m512bh>(
          _mm512_set1_epi32(*reinterpret_cast<const pair_bits*>(arow[r] + 2 * p)));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
}

// All rows of one column strip of NV vectors, R rows at a time (R = 6 for one or two vectors,
// 4 for three or four: the accumulators and the B vectors fit the 32 registers), the last
// rows in one block of their own so that short tiles (17 rows) stream B twice, not 7 times.
template <int NV>
void strip(int64_t rows, int64_t kp, const bf16_t* a, int64_t lda, const bf16_t* b, int64_t ldb,
           float* c, int64_t ldc, const __mmask16* mask, bool accumulate) {
  constexpr int R = NV <= 2 ? 6 : 4;
  int64_t r = 0;
  for (; r + R <= rows; r += R)
    block<R, NV>(kp, a + r * lda, lda, b, ldb, c + r * ldc, ldc, mask, accumulate);
  a += r * lda, c += r * ldc;
  switch (rows - r) {
    case 5:
      if constexpr (R > 5) block<5, NV>(kp, a, lda, b, ldb, c, ldc, mask, accumulate);
      break;
    case 4:
      if constexpr (R > 4) block<4, NV>(kp, a, lda, b, ldb, c, ldc, mask, accumulate);
      break;
    case 3:
      block<3, NV>(kp, a, lda, b, ldb, c, ldc, mask, accumulate);
      break;
    case 2:
      block<2, NV>(kp, a, lda, b, ldb, c, ldc, mask, accumulate);
      break;
    case 1:
      block<1, NV>(kp, a, lda, b, ldb, c, ldc, mask, accumulate);
      break;
    default:
      break;
  }
}

void tile_product_avx512(int64_t rows, int64_t cols, int64_t kp, const bf16_t* a, int64_t lda,
                         const bf16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t c0 = 0; c0 < cols; c0 += 64) {
    const int64_t w = std::min<int64_t>(64, cols - c0);
    __mmask16 mask[4];
    for (int v = 0; v < 4; ++v) {
      const int64_t left = std::clamp<int64_t>(w - 16 * v, 0, 16);
      mask[v] = static_cast<__mmask16>((1u << left) - 1u);
    }
    const bf16_t* bs = b + 2 * c0;
    float* cs = c + c0;
    switch ((w + 15) / 16) {
      case 1:
        strip<1>(rows, kp, a, lda, bs, ldb, cs, ldc, mask, accumulate);
        break;
      case 2:
        strip<2>(rows, kp, a, lda, bs, ldb, cs, ldc, mask, accumulate);
        break;
      case 3:
        strip<3>(rows, kp, a, lda, bs, ldb, cs, ldc, mask, accumulate);
        break;
      default:
        strip<4>(rows, kp, a, lda, bs, ldb, cs, ldc, mask, accumulate);
    }
  }
}

// d[2c] = round(r0[c]), d[2c + 1] = round(r1[c]) (0 when r1 is null) for the first
// cols - cols % 16 columns; returns how many it wrote.
// GCC 12 warns -Wmaybe-uninitialized on the undefined vector that _mm512_cvtepu16_epi32 and
// _mm512_slli_epi32 pass internally (their maskless forms); a false positive of its inliner.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
int64_t interleave_avx512(const float* r0, const float* r1, int64_t cols, bf16_t* d) {
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m256bh lo = _mm512_cvtneps_pbh(_mm512_loadu_ps(r0 + c));
    const __m512i even = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(lo));
    __m512i words = even;
    if (r1) {
      const __m256bh hi = _mm512_cvtneps_pbh(_mm512_loadu_ps(r1 + c));
      words = _mm512_or_si512(
          even, _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(hi)), 16));
    }
    _mm512_storeu_si512(d + 2 * c, words);
  }
  return c;
}
#pragma GCC diagnostic pop

}  // namespace
#pragma GCC pop_options
#endif

void bf16_tile_product_reference(int64_t rows, int64_t cols, int64_t kp, const bf16_t* a,
                                 int64_t lda, const bf16_t* b, int64_t ldb, float* c, int64_t ldc,
                                 bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float s = accumulate ? c[r * ldc + j] : 0.0f;
      for (int64_t p = 0; p < kp; ++p) {
        s += bf16_to_float(a[r * lda + 2 * p]) * bf16_to_float(b[p * ldb + 2 * j]);
        s += bf16_to_float(a[r * lda + 2 * p + 1]) * bf16_to_float(b[p * ldb + 2 * j + 1]);
      }
      c[r * ldc + j] = s;
    }
}

void bf16_tile_product(int64_t rows, int64_t cols, int64_t kp, const bf16_t* a, int64_t lda,
                       const bf16_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
#if defined(__x86_64__)
  if (bf16_simd()) return tile_product_avx512(rows, cols, kp, a, lda, b, ldb, c, ldc, accumulate);
#endif
  bf16_tile_product_reference(rows, cols, kp, a, lda, b, ldb, c, ldc, accumulate);
}

void pack_bf16_rows(const float* src, int64_t rows, int64_t cols, int64_t lds, bf16_t* dst,
                    int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    to_bf16(src + r * lds, dst + r * ldd, cols);
    if (cols & 1) dst[r * ldd + cols] = 0;
  }
}

void pack_bf16_transposed(const float* src, int64_t rows, int64_t cols, int64_t lds, bf16_t* dst,
                          int64_t ldd) {
  // Each source row rounded once (vectorized), then its elements scattered down the columns.
  bf16_t row[512];
  for (int64_t c0 = 0; c0 < cols; c0 += 512) {
    const int64_t w = std::min<int64_t>(512, cols - c0);
    for (int64_t r = 0; r < rows; ++r) {
      to_bf16(src + r * lds + c0, row, w);
      for (int64_t c = 0; c < w; ++c) dst[(c0 + c) * ldd + r] = row[c];
    }
  }
  if (rows & 1)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + rows] = 0;
}

namespace {

// d[2c] = round(r0[c]), d[2c + 1] = round(r1[c]) (0 when r1 is null), c < cols.
void interleave_rows(const float* r0, const float* r1, int64_t cols, bf16_t* d) {
  int64_t c = 0;
#if defined(__x86_64__)
  if (bf16_simd()) c = interleave_avx512(r0, r1, cols, d);
#endif
  for (; c < cols; ++c) {
    d[2 * c] = bf16_round(r0[c]);
    d[2 * c + 1] = r1 ? bf16_round(r1[c]) : bf16_t(0);
  }
}

}  // namespace

void pack_bf16_pairs(const float* src, int64_t rows, int64_t cols, int64_t lds, bf16_t* dst,
                     int64_t ldd) {
  for (int64_t p = 0; p < pairs_of(rows); ++p) {
    const float* r0 = src + 2 * p * lds;
    interleave_rows(r0, 2 * p + 1 < rows ? r0 + lds : nullptr, cols, dst + p * ldd);
  }
}

void pack_bf16_pairs_transposed(const float* src, int64_t rows, int64_t cols, int64_t lds,
                                bf16_t* dst, int64_t ldd) {
  // Row r of src, rounded and padded to even, is column r of B: its pair p goes to pair-row p.
  bf16_t row[1024];
  for (int64_t c0 = 0; c0 < cols; c0 += 1024) {
    const int64_t w = std::min<int64_t>(1024, cols - c0), np = pairs_of(w);
    for (int64_t r = 0; r < rows; ++r) {
      to_bf16(src + r * lds + c0, row, w);
      if (w & 1) row[w] = 0;
      for (int64_t p = 0; p < np; ++p)
        std::memcpy(dst + (c0 / 2 + p) * ldd + 2 * r, row + 2 * p, 2 * sizeof(bf16_t));
    }
  }
}

}  // namespace qkv::kernel
