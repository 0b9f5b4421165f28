// Rotary positions' row kernels (see fused.hpp): one pass over x forward, one over g back.
#include <algorithm>

#include "fused.hpp"
#include "kernel_util.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

// x: (..., n, d), d even; cos, sin: (n, d/2) of x's float dtype.
void check_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, const char* op) {
  QKV_CHECK(x.defined() && cos.defined() && sin.defined(), op, "undefined tensor");
  QKV_CHECK(x.dim() >= 2 && x.size(-1) % 2 == 0, op, "input ", x.shape(),
            " is not (..., n, d) with d even");
  const Shape table = {x.size(-2), x.size(-1) / 2};
  QKV_CHECK(cos.shape() == table && sin.shape() == table, op, "cos ", cos.shape(), " and sin ",
            sin.shape(), " do not fit input ", x.shape(), ": expected ", table, " (n, d/2)");
  QKV_CHECK(is_floating(x.dtype()) && cos.dtype() == x.dtype() && sin.dtype() == x.dtype(), op,
            "input, cos and sin must share one float dtype, got ", dtype_name(x.dtype()), ", ",
            dtype_name(cos.dtype()), ", ", dtype_name(sin.dtype()));
}

// Pairs per step of rotate_row: its four product buffers stay in L1.
constexpr int64_t kPairs = 64;

// One row of half pairs, x's elements sx apart: out = R(a) x, or R(-a) x when Inverse.
// The four products are written to buffers by one loop and summed by another: no loop has a
// multiply feeding an add, so no compiler can fuse the two into an FMA, and each product is
// rounded before its sum, as in the composed op's separate mul and add passes. A compiler flag
// cannot promise that: under -ffp-contract=off GCC 12 still vectorizes e c - o s, e s + o c
// into vfmaddsub.
// Called with sx = 1 for the common packed rows, so that copy vectorizes.
template <bool Inverse, class T>
void rotate_row(const T* __restrict x, int64_t sx, const T* __restrict c, const T* __restrict s,
                T* __restrict out, int64_t half) {
  T ec[kPairs], os[kPairs], es[kPairs], oc[kPairs];
  for (int64_t i0 = 0; i0 < half; i0 += kPairs) {
    const int64_t m = std::min(kPairs, half - i0);
    const T* xi = x + 2 * i0 * sx;
    const T *ci = c + i0, *si = s + i0;
    for (int64_t i = 0; i < m; ++i) {
      const T e = xi[2 * i * sx], o = xi[(2 * i + 1) * sx];
      ec[i] = e * ci[i];
      os[i] = o * si[i];
      es[i] = e * si[i];
      oc[i] = o * ci[i];
    }
    T* oi = out + 2 * i0;
    for (int64_t i = 0; i < m; ++i) {
      if constexpr (Inverse) {
        oi[2 * i] = ec[i] + os[i];
        oi[2 * i + 1] = oc[i] - es[i];
      } else {
        oi[2 * i] = ec[i] - os[i];
        oi[2 * i + 1] = es[i] + oc[i];
      }
    }
  }
}

// x: (..., n, d) any strides -> out (..., n, d) packed; row r of out is at position r % n.
template <bool Inverse, class T>
void rotate_rows(const Tensor& x, const T* cos, const T* sin, T* out) {
  const int64_t n = x.size(-2), d = x.size(-1), half = d / 2, nb = x.numel() / (n * d);
  const kernel::Mat<T> rows = kernel::mat<T>(x, nb);  // each batch entry's rows, any strides
  const int64_t sx = x.stride(-1);
  parallel_for(nb * n, d, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t p = r % n;
      const T* xr = rows.row(r / n, p);
      const T *c = cos + p * half, *s = sin + p * half;
      if (sx == 1)
        rotate_row<Inverse>(xr, int64_t{1}, c, s, out + r * d, half);
      else
        rotate_row<Inverse>(xr, sx, c, s, out + r * d, half);
    }
  });
}

template <bool Inverse>
Tensor rotate(const Tensor& x, const Tensor& cos_in, const Tensor& sin_in, const char* op) {
  check_rotary(x, cos_in, sin_in, op);
  Tensor out = empty(x.shape(), x.dtype());
  if (x.numel() == 0) return out;
  const Tensor cos = cos_in.contiguous(), sin = sin_in.contiguous();
  visit_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rotate_rows<Inverse, T>(x, cos.data<T>(), sin.data<T>(), out.data<T>());
  });
  return out;
}

}  // namespace

Tensor rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return rotate<false>(x, cos, sin, "rotary");
}

Tensor rotary_backward(const Tensor& g, const Tensor& cos, const Tensor& sin) {
  return rotate<true>(g, cos, sin, "rotary backward");
}

}  // namespace qkv
