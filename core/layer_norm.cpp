// LayerNorm's and RMSNorm's row kernels (see fused.hpp): one pass per row forward, one
// backward. RMSNorm is LayerNorm without the centering (Zhang & Sennrich, 2019): the same
// kernels with the mean taken as 0 forward and mean(dxhat) as 0 backward.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "bf16_cache.hpp"
#include "fused.hpp"
#include "lanes.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

// Whether a product will read t rounded to bfloat16 (a float32 tensor in a bf16 scope): then
// the kernel that writes t rounds it in the same pass.
bool rounds_to_bf16(const Tensor& t) {
  return t.dtype() == DType::f32 && t.numel() > 0 && current_precision() == Precision::bf16;
}

// One row of d elements: xhat = (x - mean) * rstd, rstd and, when y is given, y = xhat * gamma +
// beta (gamma, beta: (d) or null). xr may be xh (normalised in place). Not Centered: mean = 0,
// so rstd = 1 / sqrt(mean(x^2) + eps). copy: y's (xhat's without y) bfloat16 copy, or null.
template <bool Centered, class T>
void normalize_row(const T* xr, T* xh, T* rstd, T* yr, const T* gamma, const T* beta, int64_t d,
                   double eps, bf16_t* copy) {
  const double mu = Centered ? kernel::sum_lanes(xr, d) / d : 0.0;
  const double v = kernel::sum_sq_dev_lanes(xr, mu, d);
  const double rs = 1.0 / std::sqrt(v / d + eps);
  *rstd = static_cast<T>(rs);
  for (int64_t j = 0; j < d; ++j) xh[j] = static_cast<T>((xr[j] - mu) * rs);
  if (yr) {
    if (gamma && beta) {
      for (int64_t j = 0; j < d; ++j) yr[j] = xh[j] * gamma[j] + beta[j];
    } else if (gamma) {
      for (int64_t j = 0; j < d; ++j) yr[j] = xh[j] * gamma[j];
    } else {
      for (int64_t j = 0; j < d; ++j) yr[j] = xh[j] + beta[j];
    }
  }
  if constexpr (std::is_same_v<T, float>)
    if (copy) to_bf16(yr ? yr : xh, copy, d);
}

// x: (R, D) packed. Writes xhat, rstd (R) and y (R, D) when given, row by row (normalize_row).
template <bool Centered, class T>
void normalize_rows(const T* x, T* xhat, T* rstd, T* y, const T* gamma, const T* beta, int64_t rows,
                    int64_t d, double eps) {
  parallel_for(rows, d, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r)
      normalize_row<Centered, T>(x + r * d, xhat + r * d, rstd + r, y ? y + r * d : nullptr, gamma,
                                 beta, d, eps, nullptr);
  });
}

// x, a: (R, D) packed. s = x + a in s (R, D) when given, else in xhat's row (normalised there in
// place), then that row as normalize_row: the bits of add then normalize_rows.
template <bool Centered, class T>
void add_normalize_rows(const T* x, const T* a, T* s, T* xhat, T* rstd, T* y, const T* gamma,
                        const T* beta, int64_t rows, int64_t d, double eps, bf16_t* copy) {
  parallel_for(rows, 2 * d, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      const T* ar = a + r * d;
      T* sr = s ? s + r * d : xhat + r * d;
      for (int64_t j = 0; j < d; ++j) sr[j] = xr[j] + ar[j];
      normalize_row<Centered, T>(sr, xhat + r * d, rstd + r, y ? y + r * d : nullptr, gamma, beta,
                                 d, eps, copy ? copy + r * d : nullptr);
    }
  });
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * gamma; not
// Centered, the mean(dxhat) term is 0 (the mean did not move with x). copy: dx's bfloat16 copy
// (R, D), or null.
template <bool Centered, class T>
void layer_norm_dx(const T* g, const T* gamma, const T* xhat, const T* rstd, T* dx, int64_t rows,
                   int64_t d, bf16_t* copy) {
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
      if constexpr (std::is_same_v<T, float>)
        if (copy) to_bf16(dxr, copy + r * d, d);
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

// round: in a bf16 scope, dx's bfloat16 copy in the same pass (bf16_activation_slot).
template <bool Centered>
Tensor normalize_backward(const Tensor& g_in, const Tensor& gamma, const Tensor& xhat,
                          const Tensor& rstd, const char* op, bool round = false) {
  const Tensor g = g_in.contiguous();
  const int64_t rows = rstd.numel(), d = g.size(-1);
  Tensor dx = empty(g.shape(), g.dtype());
  bf16_t* copy = round && rounds_to_bf16(dx)
                     ? detail::bf16_activation_slot(detail::StoredMatrix{dx, rows, d, d})
                     : nullptr;
  visit_float(g.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor gc = gamma.defined() ? gamma.contiguous() : Tensor();
    layer_norm_dx<Centered, T>(g.data<T>(), gc.defined() ? gc.data<T>() : nullptr, xhat.data<T>(),
                               rstd.data<T>(), dx.data<T>(), rows, d, copy);
  });
  return dx;
}

template <bool Centered>
AddNormResult add_normalize(const Tensor& x_in, const Tensor& a_in, const Tensor& gamma,
                            const Tensor& beta, double eps, bool keep_sum, const char* op) {
  QKV_CHECK(x_in.shape() == a_in.shape() && x_in.dtype() == a_in.dtype() && x_in.dim() >= 1, op,
            "x ", x_in.shape(), " and a ", a_in.shape(), " must have one shape and dtype");
  const int64_t d = x_in.size(-1);
  QKV_CHECK(!gamma.defined() || (gamma.shape() == Shape{d} && gamma.dtype() == x_in.dtype()), op,
            "weight ", gamma.shape(), " for input ", x_in.shape());
  QKV_CHECK(!beta.defined() || (beta.shape() == Shape{d} && beta.dtype() == x_in.dtype()), op,
            "bias ", beta.shape(), " for input ", x_in.shape());
  QKV_CHECK(eps > 0 || Centered, op, "eps must be > 0, got ", eps);
  const Tensor x = x_in.contiguous(), a = a_in.contiguous();
  const int64_t rows = x.numel() / std::max<int64_t>(d, 1);
  AddNormResult r;
  if (keep_sum) r.sum = empty(x.shape(), x.dtype());
  LayerNormResult& n = r.norm;
  n.xhat = empty(x.shape(), x.dtype());
  n.rstd = empty({rows}, x.dtype());
  const bool affine = gamma.defined() || beta.defined();
  n.y = affine ? empty(x.shape(), x.dtype()) : n.xhat;
  bf16_t* copy = rounds_to_bf16(n.y)
                     ? detail::bf16_activation_slot(detail::StoredMatrix{n.y, rows, d, d})
                     : nullptr;
  const Tensor gc = gamma.defined() ? gamma.contiguous() : Tensor();
  const Tensor bc = beta.defined() ? beta.contiguous() : Tensor();
  visit_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_normalize_rows<Centered, T>(
        x.data<T>(), a.data<T>(), keep_sum ? r.sum.data<T>() : nullptr, n.xhat.data<T>(),
        n.rstd.data<T>(), affine ? n.y.data<T>() : nullptr, gc.defined() ? gc.data<T>() : nullptr,
        bc.defined() ? bc.data<T>() : nullptr, rows, d, eps, copy);
  });
  return r;
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

AddNormResult add_norm_forward(const Tensor& x, const Tensor& a, const Tensor& gamma,
                               const Tensor& beta, double eps, bool centered, bool keep_sum) {
  QKV_CHECK(centered || !beta.defined(), "add_rms_norm", "RMSNorm has no bias");
  return centered ? add_normalize<true>(x, a, gamma, beta, eps, keep_sum, "add_layer_norm")
                  : add_normalize<false>(x, a, gamma, beta, eps, keep_sum, "add_rms_norm");
}

Tensor norm_backward_rounded(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                             const Tensor& rstd, bool centered) {
  return centered ? normalize_backward<true>(g, gamma, xhat, rstd, "add_layer_norm backward", true)
                  : normalize_backward<false>(g, gamma, xhat, rstd, "add_rms_norm backward", true);
}

}  // namespace qkv
