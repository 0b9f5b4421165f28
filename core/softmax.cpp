// Softmax and log-softmax along one dim, and their backward kernels.
//
// Stable: each lane subtracts its max before exp, so logits of 1e4 stay finite. A lane that
// is entirely -inf (a query with nothing to attend to) gives zeros from softmax, not NaN.
#include <cmath>
#include <limits>

#include "strided.hpp"
#include "tensor.hpp"

namespace qkv {
namespace {

template <bool kLog>
Tensor softmax_impl(const Tensor& x, int64_t d, const char* op) {
  QKV_CHECK(x.defined(), op, "undefined tensor");
  QKV_CHECK(is_floating(x.dtype()), op, "expected a float32 or float64 tensor, got ",
            dtype_name(x.dtype()), " ", x.shape());
  d = wrap_dim(d, x.shape(), op);
  if (x.dim() == 0) return softmax_impl<kLog>(x.reshape({1}), 0, op).reshape({});
  Tensor out = empty(x.shape(), x.dtype());
  visit_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    detail::for_each_lane<2>(
        x.shape(), d, {&out.strides(), &x.strides()}, [&](auto base, int64_t n, auto st) {
          const T* in = px + base[1];
          T* o = po + base[0];
          T m = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j < n; ++j) m = std::max(m, in[j * st[1]]);
          if (m == -std::numeric_limits<T>::infinity()) {
            // fully masked: zeros; unless a NaN (which max skips) is
            // there: then NaN, as everywhere else
            bool nan = false;
            for (int64_t j = 0; j < n; ++j) nan |= in[j * st[1]] != in[j * st[1]];
            const T fill = nan ? std::numeric_limits<T>::quiet_NaN() : kLog ? m : T(0);
            for (int64_t j = 0; j < n; ++j) o[j * st[0]] = fill;
            return;
          }
          double z = 0;
          for (int64_t j = 0; j < n; ++j) {
            const T e = std::exp(in[j * st[1]] - m);
            if (!kLog) o[j * st[0]] = e;
            z += e;
          }
          if (kLog) {
            // (x - m) - log z, not x - (m + log z): with m = 1e4 in
            // float32 the sum m + log z would round away log z.
            const T lz = static_cast<T>(std::log(z));
            for (int64_t j = 0; j < n; ++j) o[j * st[0]] = (in[j * st[1]] - m) - lz;
          } else {
            const T inv = static_cast<T>(1.0 / z);
            for (int64_t j = 0; j < n; ++j) o[j * st[0]] *= inv;
          }
        });
  });
  return out;
}

// dx = y * (g - sum(g * y))           for softmax
// dx = g - exp(y) * sum(g)            for log-softmax (y = log-probabilities)
template <bool kLog>
Tensor softmax_backward_impl(const Tensor& y, const Tensor& g, int64_t d, const char* op) {
  QKV_CHECK(y.defined() && g.defined(), op, "undefined tensor");
  QKV_CHECK(y.shape() == g.shape() && y.dtype() == g.dtype(), op, "output ", y.shape(), " ",
            dtype_name(y.dtype()), " and gradient ", g.shape(), " ", dtype_name(g.dtype()),
            " differ");
  d = wrap_dim(d, y.shape(), op);
  if (y.dim() == 0)
    return softmax_backward_impl<kLog>(y.reshape({1}), g.reshape({1}), 0, op).reshape({});
  Tensor out = empty(y.shape(), y.dtype());
  visit_float(y.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* py = y.data<T>();
    const T* pg = g.data<T>();
    T* po = out.data<T>();
    detail::for_each_lane<3>(y.shape(), d, {&out.strides(), &y.strides(), &g.strides()},
                             [&](auto base, int64_t n, auto st) {
                               const T* yy = py + base[1];
                               const T* gg = pg + base[2];
                               T* o = po + base[0];
                               double s = 0;
                               for (int64_t j = 0; j < n; ++j)
                                 s += kLog ? double(gg[j * st[2]])
                                           : double(gg[j * st[2]]) * yy[j * st[1]];
                               const T ts = static_cast<T>(s);
                               for (int64_t j = 0; j < n; ++j) {
                                 const T yj = yy[j * st[1]], gj = gg[j * st[2]];
                                 o[j * st[0]] = kLog ? gj - std::exp(yj) * ts : yj * (gj - ts);
                               }
                             });
  });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t d) { return softmax_impl<false>(x, d, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t d) { return softmax_impl<true>(x, d, "log_softmax"); }
Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t d) {
  return softmax_backward_impl<false>(y, g, d, "softmax_backward");
}
Tensor log_softmax_backward(const Tensor& y, const Tensor& g, int64_t d) {
  return softmax_backward_impl<true>(y, g, d, "log_softmax_backward");
}

}  // namespace qkv
