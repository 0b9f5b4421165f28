// LayerNorm's row kernels (see fused.hpp): one pass per row forward, one backward.
#include <algorithm>
#include <cmath>

#include "fused.hpp"
#include "lanes.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

// x: (R, D) packed. Writes xhat = (x - mean) * rstd (R, D), rstd (R) and, when y is given,
// y = xhat * gamma + beta (R, D) in the same pass (gamma, beta: (D) or null).
template <class T>
void normalize_rows(const T* x, T* xhat, T* rstd, T* y, const T* gamma, const T* beta, int64_t rows,
                    int64_t d, double eps) {
  parallel_for(rows, d, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      const double mu = kernel::sum_lanes(xr, d) / d;
      const double v = kernel::sum_sq_dev_lanes(xr, mu, d);
      const double rs = 1.0 / std::sqrt(v / d + eps);
      rstd[r] = static_cast<T>(rs);
      T* xh = xhat + r * d;
      for (int64_t j = 0; j < d; ++j) xh[j] = static_cast<T>((xr[j] - mu) * rs);
      if (!y) continue;
      T* yr = y + r * d;
      if (gamma && beta) {
        for (int64_t j = 0; j < d; ++j) yr[j] = xh[j] * gamma[j] + beta[j];
      } else if (gamma) {
        for (int64_t j = 0; j < d; ++j) yr[j] = xh[j] * gamma[j];
      } else {
        for (int64_t j = 0; j < d; ++j) yr[j] = xh[j] + beta[j];
      }
    }
  });
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * gamma.
template <class T>
void layer_norm_dx(const T* g, const T* gamma, const T* xhat, const T* rstd, T* dx, int64_t rows,
                   int64_t d) {
  parallel_for(rows, d, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* gr = g + r * d;
      const T* xr = xhat + r * d;
      // m1 = mean(dxhat), m2 = mean(dxhat * xhat), dxhat = g * gamma: double lane sums
      double m1, m2;
      if (gamma) {
        double l1[kernel::kLanes] = {}, l2[kernel::kLanes] = {};
        int64_t j = 0;
        for (; j + kernel::kLanes <= d; j += kernel::kLanes)
          for (int l = 0; l < kernel::kLanes; ++l) {
            const double dxh = double(gr[j + l]) * gamma[j + l];
            l1[l] += dxh;
            l2[l] += dxh * xr[j + l];
          }
        for (int l = 0; j < d; ++j, ++l) {
          const double dxh = double(gr[j]) * gamma[j];
          l1[l] += dxh;
          l2[l] += dxh * xr[j];
        }
        m1 = kernel::combine_lanes(l1) / d;
        m2 = kernel::combine_lanes(l2) / d;
      } else {
        m1 = kernel::sum_lanes(gr, d) / d;
        m2 = kernel::dot_lanes(gr, xr, d) / d;
      }
      const double rs = rstd[r];
      T* dxr = dx + r * d;
      if (gamma) {
        for (int64_t j = 0; j < d; ++j)
          dxr[j] = static_cast<T>(rs * (double(gr[j]) * gamma[j] - m1 - xr[j] * m2));
      } else {
        for (int64_t j = 0; j < d; ++j) dxr[j] = static_cast<T>(rs * (gr[j] - m1 - xr[j] * m2));
      }
    }
  });
}

}  // namespace

LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   double eps) {
  const int64_t d = x.size(-1);
  QKV_CHECK(!gamma.defined() || gamma.shape() == Shape{d}, "layer_norm", "weight ", gamma.shape(),
            " for input ", x.shape());
  QKV_CHECK(!beta.defined() || beta.shape() == Shape{d}, "layer_norm", "bias ", beta.shape(),
            " for input ", x.shape());
  const Tensor xc = x.contiguous();
  const int64_t rows = xc.numel() / std::max<int64_t>(d, 1);
  LayerNormResult r;
  r.xhat = empty(xc.shape(), xc.dtype());
  r.rstd = empty({rows}, xc.dtype());
  const bool affine = gamma.defined() || beta.defined();
  r.y = affine ? empty(xc.shape(), xc.dtype()) : r.xhat;
  const Tensor gc = gamma.defined() ? gamma.contiguous() : Tensor();
  const Tensor bc = beta.defined() ? beta.contiguous() : Tensor();
  QKV_CHECK(!gc.defined() || gc.dtype() == xc.dtype(), "layer_norm",
            "weight dtype differs from input");
  QKV_CHECK(!bc.defined() || bc.dtype() == xc.dtype(), "layer_norm",
            "bias dtype differs from input");
  visit_float(xc.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize_rows<T>(xc.data<T>(), r.xhat.data<T>(), r.rstd.data<T>(),
                      affine ? r.y.data<T>() : nullptr, gc.defined() ? gc.data<T>() : nullptr,
                      bc.defined() ? bc.data<T>() : nullptr, rows, d, eps);
  });
  return r;
}

Tensor layer_norm_backward(const Tensor& g_in, const Tensor& gamma, const Tensor& xhat,
                           const Tensor& rstd) {
  const Tensor g = g_in.contiguous();
  const int64_t rows = rstd.numel(), d = g.size(-1);
  Tensor dx = empty(g.shape(), g.dtype());
  visit_float(g.dtype(), "layer_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor gc = gamma.defined() ? gamma.contiguous() : Tensor();
    layer_norm_dx<T>(g.data<T>(), gc.defined() ? gc.data<T>() : nullptr, xhat.data<T>(),
                     rstd.data<T>(), dx.data<T>(), rows, d);
  });
  return dx;
}

}  // namespace qkv
