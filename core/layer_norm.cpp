// LayerNorm's and RMSNorm's row kernels (see fused.hpp): one pass per row forward, one
// backward. RMSNorm is LayerNorm without the centering (Zhang & Sennrich, 2019): the same
// kernels with the mean taken as 0 forward and mean(dxhat) as 0 backward.
#include <algorithm>
#include <cmath>

#include "fused.hpp"
#include "lanes.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

// x: (R, D) packed. Writes xhat = (x - mean) * rstd (R, D), rstd (R) and, when y is given,
// y = xhat * gamma + beta (R, D) in the same pass (gamma, beta: (D) or null). Not Centered:
// mean = 0, so rstd = 1 / sqrt(mean(x^2) + eps).
template <bool Centered, class T>
void normalize_rows(const T* x, T* xhat, T* rstd, T* y, const T* gamma, const T* beta, int64_t rows,
                    int64_t d, double eps) {
  parallel_for(rows, d, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      const double mu = Centered ? kernel::sum_lanes(xr, d) / d : 0.0;
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

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * gamma; not
// Centered, the mean(dxhat) term is 0 (the mean did not move with x).
template <bool Centered, class T>
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
        m1 = Centered ? kernel::combine_lanes(l1) / d : 0.0;
        m2 = kernel::combine_lanes(l2) / d;
      } else {
        m1 = Centered ? kernel::sum_lanes(gr, d) / d : 0.0;
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

template <bool Centered>
LayerNormResult normalize(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                          const char* op) {
  const int64_t d = x.size(-1);
  QKV_CHECK(!gamma.defined() || gamma.shape() == Shape{d}, op, "weight ", gamma.shape(),
            " for input ", x.shape());
  QKV_CHECK(!beta.defined() || beta.shape() == Shape{d}, op, "bias ", beta.shape(), " for input ",
            x.shape());
  QKV_CHECK(eps > 0 || Centered, op, "eps must be > 0, got ", eps);
  const Tensor xc = x.contiguous();
  const int64_t rows = xc.numel() / std::max<int64_t>(d, 1);
  LayerNormResult r;
  r.xhat = empty(xc.shape(), xc.dtype());
  r.rstd = empty({rows}, xc.dtype());
  const bool affine = gamma.defined() || beta.defined();
  r.y = affine ? empty(xc.shape(), xc.dtype()) : r.xhat;
  const Tensor gc = gamma.defined() ? gamma.contiguous() : Tensor();
  const Tensor bc = beta.defined() ? beta.contiguous() : Tensor();
  QKV_CHECK(!gc.defined() || gc.dtype() == xc.dtype(), op, "weight dtype differs from input");
  QKV_CHECK(!bc.defined() || bc.dtype() == xc.dtype(), op, "bias dtype differs from input");
  visit_float(xc.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize_rows<Centered, T>(
        xc.data<T>(), r.xhat.data<T>(), r.rstd.data<T>(), affine ? r.y.data<T>() : nullptr,
        gc.defined() ? gc.data<T>() : nullptr, bc.defined() ? bc.data<T>() : nullptr, rows, d, eps);
  });
  return r;
}

template <bool Centered>
Tensor normalize_backward(const Tensor& g_in, const Tensor& gamma, const Tensor& xhat,
                          const Tensor& rstd, const char* op) {
  const Tensor g = g_in.contiguous();
  const int64_t rows = rstd.numel(), d = g.size(-1);
  Tensor dx = empty(g.shape(), g.dtype());
  visit_float(g.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor gc = gamma.defined() ? gamma.contiguous() : Tensor();
    layer_norm_dx<Centered, T>(g.data<T>(), gc.defined() ? gc.data<T>() : nullptr, xhat.data<T>(),
                               rstd.data<T>(), dx.data<T>(), rows, d);
  });
  return dx;
}

}  // namespace

LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   double eps) {
  return normalize<true>(x, gamma, beta, eps, "layer_norm");
}

Tensor layer_norm_backward(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                           const Tensor& rstd) {
  return normalize_backward<true>(g, gamma, xhat, rstd, "layer_norm backward");
}

LayerNormResult rms_norm_forward(const Tensor& x, const Tensor& gamma, double eps) {
  return normalize<false>(x, gamma, Tensor(), eps, "rms_norm");
}

Tensor rms_norm_backward(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                         const Tensor& rstd) {
  return normalize_backward<false>(g, gamma, xhat, rstd, "rms_norm backward");
}

}  // namespace qkv
