// Internal to core/: the row pass shared by the attention kernels in fp32 (core/attention.cpp)
// and bf16 (core/attention_bf16.cpp): a tile row's scaling, masking, max and exponentials.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernel_util.hpp"
#include "lanes.hpp"

namespace qkv::kernel {

// Row i of a tile after scale_mask_row: its max score, and the span [lo, hi) outside which
// every key is masked. Only the span is written and only it needs the exp: the weights outside
// are exactly 0 (fast_exp(-inf) is 0), which a causal or padding mask makes about half a row.
template <class T>
struct ScoredRow {
  T max;
  int64_t lo, hi;
};

// Scales the raw scores s[0..kb) of a tile's row and masks them to -inf within the unmasked
// span (mrow: the mask row, stride msm; null when unmasked). The max skips NaN, as std::max
// does, so its lanes can run in any order.
template <class T>
inline ScoredRow<T> scale_mask_row(T* s, int64_t kb, T sc, const uint8_t* mrow, int64_t msm) {
  int64_t lo = 0, hi = kb;
  if (mrow) {
    while (lo < hi && !mrow[lo * msm]) ++lo;
    while (hi > lo && !mrow[(hi - 1) * msm]) --hi;
  }
  constexpr T kMasked = -std::numeric_limits<T>::infinity();
  if (!mrow) {
    for (int64_t j = 0; j < kb; ++j) s[j] *= sc;
  } else if (msm == 1) {  // a contiguous mask row: the select vectorizes
    for (int64_t j = lo; j < hi; ++j) s[j] = mrow[j] ? s[j] * sc : kMasked;
  } else {
    for (int64_t j = lo; j < hi; ++j) s[j] = mrow[j * msm] ? s[j] * sc : kMasked;
  }
  return {kernel::max_lanes(s + lo, hi - lo), lo, hi};
}

// s[lo..hi) = exp(s - shift), and 0 outside: a row's softmax numerators.
template <class T>
inline void exp_row(T* s, int64_t kb, const ScoredRow<T>& r, T shift) {
  std::fill(s, s + r.lo, T(0));
  for (int64_t j = r.lo; j < r.hi; ++j) s[j] = fast_exp<T>(s[j] - shift);
  std::fill(s + r.hi, s + kb, T(0));
}

}  // namespace qkv::kernel
