// Building blocks for row kernels (softmax tiles, LayerNorm) that the compiler vectorizes.
//
// GCC vectorizes a loop only if doing so cannot change the result. An in-order floating-point
// sum cannot be reordered, so `for (j) z += x[j]` runs one element at a time; neither can a
// loop calling std::exp or std::floor (trapping math). The helpers here keep 8 independent
// partial sums (one vector register of doubles) and add them in a fixed order at the end, so
// they vectorize and still give the same bits on every run and for every thread count.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace qkv::kernel {

constexpr int kLanes = 8;

// The 8 partial sums, combined pairwise in a fixed order.
inline double combine_lanes(const double* lane) {
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// max of x[0..n) (n >= 1) over 8 partial maxima. A NaN is skipped, as std::max(m, NaN) skips
// it; -inf when every element is -inf.
template <class T>
T max_lanes(const T* x, int64_t n) {
  T lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
  for (int l = 0; j < n; ++j, ++l) lane[l] = x[j] > lane[l] ? x[j] : lane[l];
  T m = lane[0];
  for (int l = 1; l < kLanes; ++l) m = std::max(m, lane[l]);
  return m;
}

// sum of x[0..n), accumulated in double: x[j] goes to partial sum j % 8.
template <class T>
double sum_lanes(const T* x, int64_t n) {
  double lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(x[j + l]);
  for (int l = 0; j < n; ++j, ++l) lane[l] += static_cast<double>(x[j]);
  return combine_lanes(lane);
}

// sum of x[j] * y[j], as sum_lanes.
template <class T>
double dot_lanes(const T* x, const T* y, int64_t n) {
  double lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lane[l] += static_cast<double>(x[j + l]) * static_cast<double>(y[j + l]);
  for (int l = 0; j < n; ++j, ++l) lane[l] += static_cast<double>(x[j]) * static_cast<double>(y[j]);
  return combine_lanes(lane);
}

// sum of (x[j] - c)^2, as sum_lanes (a variance about a known mean c).
template <class T>
double sum_sq_dev_lanes(const T* x, double c, int64_t n) {
  double lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const double e = static_cast<double>(x[j + l]) - c;
      lane[l] += e * e;
    }
  for (int l = 0; j < n; ++j, ++l) {
    const double e = static_cast<double>(x[j]) - c;
    lane[l] += e * e;
  }
  return combine_lanes(lane);
}

// a * b + c, rounded once where the CPU has FMA. Two call sites that must agree bit for bit
// (gelu_grad and gelu_backward) use it, so the compiler's choice to contract one expression
// and not the other cannot split them. Without FMA, as written (nothing to contract), rather
// than std::fma, which would be a libm call per element there. arm64 always has FMA (and
// its own macro for it), and GCC contracts a * b + c there, so it must take std::fma too.
template <class T>
inline T mul_add(T a, T b, T c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// exp for softmax rows (x <= 88). float: a Cephes-style polynomial, within 1 ulp of std::exp on
// [-87, 1] (tests/core/test_lanes.cpp), exactly 0 below -87 and for -inf (a masked score), NaN
// for NaN (a damaged score must not turn into a weight; the clamp maps NaN to a finite value so
// the integer conversion stays defined, and x - x, 0 otherwise, brings the NaN back). The
// range reduction rounds x / ln 2 to an integer by adding and subtracting 1.5 * 2^23 rather
// than by std::floor, which would stop the loop from vectorizing. double (the gradcheck
// dtype): std::exp.
template <class T>
inline T fast_exp(T x) {
  if constexpr (std::is_same_v<T, double>) {
    return std::exp(x);
  } else {
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: float addition rounds to an integer
    const float xc = std::min(88.0f, std::max(-87.5f, x));          // NaN -> -87.5
    const float n = (xc * 1.44269504088896341f + kRound) - kRound;  // nearest integer
    const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;  // x - n ln 2, |r| <= ln2/2
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    const int32_t e = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 127]
    const float y2 = y * std::bit_cast<float>(e);
    return x < -87.0f ? 0.0f : y2 + (x - x);  // -inf (masked) and underflow give exactly 0
  }
}

// Phi(x), the standard normal CDF, for GELU. double (the gradcheck dtype): std::erfc. float: a
// branch-free form the compiler vectorizes (std::erfc is a libm call per element, which cost a
// GPT's training step a fifth of its time): erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2),
// z = |x| / sqrt 2, with the Chebyshev fit P of Press et al., Numerical Recipes section 6.2
// (relative error below 1.2e-7 for every z >= 0), so the negative tail keeps its relative
// accuracy as erfc does: no 1 + erf cancellation. NaN gives NaN; -inf gives 0, +inf 1.
template <class T>
inline T normal_cdf(T x) {
  if constexpr (std::is_same_v<T, double>) {
    return 0.5 * std::erfc(-x * M_SQRT1_2);
  } else {
    const float z = std::abs(x) * static_cast<float>(M_SQRT1_2);
    const float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    const float half_erfc = 0.5f * t * fast_exp(p - z * z);  // Phi(-|x|)
    return x > 0.0f ? 1.0f - half_erfc : half_erfc;
  }
}

// phi(x) = exp(-x^2 / 2) / sqrt(2 pi), the standard normal density; float vectorizes (fast_exp).
template <class T>
inline T normal_pdf(T x) {
  constexpr T kInvSqrt2Pi = static_cast<T>(0.398942280401432677940);
  return fast_exp(static_cast<T>(-0.5) * x * x) * kInvSqrt2Pi;
}

// Whether x[0..n) holds a NaN. Only for rows that look fully masked (their max is -inf): there
// a NaN score, which max() skips, must not pass for a mask.
template <class T>
bool any_nan(const T* x, int64_t n) {
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) nan |= x[j] != x[j];
  return nan;
}

// The pieces of a softmax row, shared by softmax and cross-entropy so that both give the same
// bits. m: the row's max (max_lanes).
//
// e = exp(x - m) for a row whose m is finite; returns sum(e), in double lanes.
template <class T>
double exp_sum_row(const T* x, int64_t n, T m, T* e) {
  for (int64_t j = 0; j < n; ++j) e[j] = fast_exp<T>(x[j] - m);
  return sum_lanes(e, n);
}

// y for a row whose max is -inf (fully masked): 0 (softmax) or -inf (log-softmax); NaN if the
// row holds a NaN, which max skips, as everywhere else.
template <bool kLog, class T>
void fill_masked_row(const T* x, int64_t n, T* y) {
  const T fill = any_nan(x, n) ? std::numeric_limits<T>::quiet_NaN()
                 : kLog        ? -std::numeric_limits<T>::infinity()
                               : T(0);
  std::fill(y, y + n, fill);
}

// y = log-softmax(x) = (x - m) - lz, lz = log(sum exp(x - m)) rounded to T; not x - (m + lz):
// with m = 1e4 in float32 the sum would round lz away.
template <class T>
void log_probs_row(const T* x, int64_t n, T m, T lz, T* y) {
  for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) - lz;
}

}  // namespace qkv::kernel
