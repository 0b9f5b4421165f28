// Softmax and log-softmax along one dim, and their backward kernels.
//
// Stable: each row subtracts its max before exp, so logits of 1e4 stay finite. A row that is
// entirely -inf (a query with nothing to attend to) gives zeros from softmax, not NaN.
//
// The work is done on contiguous rows by kernels the compiler vectorizes (kernel::fast_exp,
// sums in 8 double lanes: lanes.hpp); a strided row is copied into a contiguous one first, so
// every layout gives the same bits.
#include <array>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "lanes.hpp"
#include "strided.hpp"
#include "tensor.hpp"

namespace qkv {
namespace {

// y = softmax(x) or log_softmax(x) of one contiguous row of n >= 1 elements.
template <bool kLog, class T>
void softmax_row(const T* x, T* y, int64_t n) {
  const T m = kernel::max_lanes(x, n);
  if (m == -std::numeric_limits<T>::infinity()) return kernel::fill_masked_row<kLog>(x, n, y);
  const double z = kernel::exp_sum_row(x, n, m, y);
  if (kLog) return kernel::log_probs_row(x, n, m, static_cast<T>(std::log(z)), y);
  const T inv = static_cast<T>(1.0 / z);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

// dx = y * (g - sum(g * y))     for softmax
// dx = g - exp(y) * sum(g)      for log-softmax (y = log-probabilities)
// of one contiguous row.
template <bool kLog, class T>
void softmax_backward_row(const T* y, const T* g, T* dx, int64_t n) {
  const T s = static_cast<T>(kLog ? kernel::sum_lanes(g, n) : kernel::dot_lanes(g, y, n));
  for (int64_t j = 0; j < n; ++j)
    dx[j] = kLog ? g[j] - kernel::fast_exp<T>(y[j]) * s : y[j] * (g[j] - s);
}

// Runs row(in rows..., out row, n) over every lane of out along d. Contiguous lanes go straight
// to `row`; strided ones through contiguous copies.
template <class T, size_t N, class Row>
void for_each_row(Tensor& out, const std::array<const Tensor*, N>& ins, int64_t d, Row row) {
  constexpr size_t K = N + 1;  // the output is tensor 0
  std::array<const Shape*, K> strides{&out.strides()};
  for (size_t k = 0; k < N; ++k) strides[k + 1] = &ins[k]->strides();
  T* po = out.data<T>();
  detail::for_each_lane<K>(out.shape(), d, strides, [&](auto base, int64_t n, auto st) {
    std::array<const T*, N> in;
    bool packed = st[0] == 1;
    for (size_t k = 0; k < N; ++k) {
      in[k] = ins[k]->template data<T>() + base[k + 1];
      packed = packed && st[k + 1] == 1;
    }
    if (packed) return std::apply([&](auto... p) { row(p..., po + base[0], n); }, in);
    // the N input rows, then the output row; one buffer per thread, not one per row
    thread_local std::vector<T> buf;
    buf.resize(K * n);
    std::array<const T*, N> rows;
    for (size_t k = 0; k < N; ++k) {
      for (int64_t j = 0; j < n; ++j) buf[k * n + j] = in[k][j * st[k + 1]];
      rows[k] = buf.data() + k * n;
    }
    T* o = buf.data() + N * n;
    std::apply([&](auto... p) { row(p..., o, n); }, rows);
    for (int64_t j = 0; j < n; ++j) po[base[0] + j * st[0]] = o[j];
  });
}

template <bool kLog>
Tensor softmax_impl(const Tensor& x, int64_t d, const char* op) {
  QKV_CHECK(x.defined(), op, "undefined tensor");
  QKV_CHECK(is_floating(x.dtype()), op, "expected a float32 or float64 tensor, got ",
            dtype_name(x.dtype()), " ", x.shape());
  d = wrap_dim(d, x.shape(), op);
  if (x.dim() == 0) return softmax_impl<kLog>(x.reshape({1}), 0, op).reshape({});
  Tensor out = empty(x.shape(), x.dtype());
  if (x.size(d) == 0) return out;
  visit_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_row<T, 1>(out, {&x}, d, softmax_row<kLog, T>);
  });
  return out;
}

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
  if (y.size(d) == 0) return out;
  visit_float(y.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_row<T, 2>(out, {&y, &g}, d, softmax_backward_row<kLog, T>);
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
