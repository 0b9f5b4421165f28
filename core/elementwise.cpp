// Elementwise ops: binary with NumPy broadcasting, scalar variants, unary maps, masks.
#include <cmath>
#include <limits>
#include <type_traits>

#include "fused.hpp"
#include "lanes.hpp"
#include "strided.hpp"
#include "tensor.hpp"

namespace qkv {
namespace {

// out = f(a, b) elementwise; a, b: one dtype T, broadcast together; out dtype R.
template <class T, class R, class F>
Tensor binary_kernel(const Tensor& a_in, const Tensor& b_in, F f, const char* op) {
  const Shape shape = broadcast_shapes(a_in.shape(), b_in.shape(), op);
  const Tensor a = a_in.expand(shape), b = b_in.expand(shape);
  Tensor out = empty(shape, dtype_of<R>());
  R* o = out.data<R>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  detail::for_each_row<3>(shape, {&out.strides(), &a.strides(), &b.strides()},
                          [&](auto base, int64_t n, auto st) {
                            R* po = o + base[0];
                            const T* x = pa + base[1];
                            const T* y = pb + base[2];
                            if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                              for (int64_t j = 0; j < n; ++j) po[j] = f(x[j], y[j]);
                            } else {
                              for (int64_t j = 0; j < n; ++j)
                                po[j * st[0]] = f(x[j * st[1]], y[j * st[2]]);
                            }
                          });
  return out;
}

// out = f(x) elementwise, out dtype R.
template <class T, class R, class F>
Tensor unary_kernel(const Tensor& x, F f) {
  Tensor out = empty(x.shape(), dtype_of<R>());
  R* o = out.data<R>();
  const T* px = x.data<T>();
  detail::for_each_row<2>(x.shape(), {&out.strides(), &x.strides()},
                          [&](auto base, int64_t n, auto st) {
                            R* po = o + base[0];
                            const T* pi = px + base[1];
                            if (st[0] == 1 && st[1] == 1) {
                              for (int64_t j = 0; j < n; ++j) po[j] = f(pi[j]);
                            } else {
                              for (int64_t j = 0; j < n; ++j) po[j * st[0]] = f(pi[j * st[1]]);
                            }
                          });
  return out;
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  QKV_CHECK(a.defined() && b.defined(), op, "undefined tensor");
  QKV_CHECK(a.dtype() == b.dtype(), op, "dtype mismatch: ", dtype_name(a.dtype()), " ", a.shape(),
            " and ", dtype_name(b.dtype()), " ", b.shape());
}

// Arithmetic on float and int64 tensors (same dtype), result of the same dtype.
template <class F>
Tensor arith(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  QKV_CHECK(a.dtype() != DType::b8, op, "arithmetic on bool tensors ", a.shape());
  return visit_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return binary_kernel<T, T>(
        a, b, [&](T x, T y) { return static_cast<T>(f(x, y)); }, op);
  });
}

template <class F>
Tensor arith_scalar(const Tensor& a, const char* op, F f) {
  QKV_CHECK(a.defined(), op, "undefined tensor");
  QKV_CHECK(a.dtype() != DType::b8, op, "arithmetic on bool tensor ", a.shape());
  return visit_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return unary_kernel<T, T>(a, [&](T x) { return static_cast<T>(f(x)); });
  });
}

template <class F>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  return visit_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return binary_kernel<T, uint8_t>(
        a, b, [&](T x, T y) { return uint8_t(f(x, y)); }, op);
  });
}

template <class F>
Tensor compare_scalar(const Tensor& a, double s, const char* op, F f) {
  QKV_CHECK(a.defined(), op, "undefined tensor");
  return visit_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      // Compare the true values: int64 2 < 2.5, and never equal to a fractional scalar.
      return unary_kernel<T, uint8_t>(a,
                                      [&](T x) { return uint8_t(f(static_cast<double>(x), s)); });
    } else {
      // As torch: the scalar takes the tensor's float type.
      const T v = static_cast<T>(s);
      return unary_kernel<T, uint8_t>(a, [&](T x) { return uint8_t(f(x, v)); });
    }
  });
}

void check_float(const Tensor& x, const char* op) {
  QKV_CHECK(x.defined(), op, "undefined tensor");
  QKV_CHECK(is_floating(x.dtype()), op, "expected a float32 or float64 tensor, got ",
            dtype_name(x.dtype()), " ", x.shape());
}

// NaN-propagating max/min (as torch.maximum): a NaN on either side gives NaN.
template <class T>
T max_nan(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    if (x != x || y != y) return std::numeric_limits<T>::quiet_NaN();
  return x >= y ? x : y;
}
template <class T>
T min_nan(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    if (x != x || y != y) return std::numeric_limits<T>::quiet_NaN();
  return x <= y ? x : y;
}

template <class F>
Tensor float_map(const Tensor& x, const char* op, F f) {
  check_float(x, op);
  return visit_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return unary_kernel<T, T>(x, [&](T v) { return static_cast<T>(f(v)); });
  });
}

void check_mask(const Tensor& m, const char* op) {
  QKV_CHECK(m.defined() && m.dtype() == DType::b8, op, "expected a bool mask, got ",
            m.defined() ? dtype_name(m.dtype()) : "undefined", " ", m.shape());
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return arith(a, b, "add", [](auto x, auto y) { return x + y; });
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return arith(a, b, "sub", [](auto x, auto y) { return x - y; });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return arith(a, b, "mul", [](auto x, auto y) { return x * y; });
}
Tensor div(const Tensor& a, const Tensor& b) {
  return arith(a, b, "div", [](auto x, auto y) { return x / y; });
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return arith(a, b, "pow", [](auto x, auto y) { return std::pow(x, y); });
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return arith(a, b, "maximum", [](auto x, auto y) { return max_nan(x, y); });
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return arith(a, b, "minimum", [](auto x, auto y) { return min_nan(x, y); });
}

Tensor add(const Tensor& a, double s) {
  return arith_scalar(a, "add", [s](auto x) { return x + s; });
}
Tensor sub(const Tensor& a, double s) {
  return arith_scalar(a, "sub", [s](auto x) { return x - s; });
}
Tensor rsub(double s, const Tensor& a) {
  return arith_scalar(a, "rsub", [s](auto x) { return s - x; });
}
Tensor mul(const Tensor& a, double s) {
  return arith_scalar(a, "mul", [s](auto x) { return x * s; });
}
Tensor div(const Tensor& a, double s) {
  return arith_scalar(a, "div", [s](auto x) { return x / s; });
}
Tensor rdiv(double s, const Tensor& a) {
  return arith_scalar(a, "rdiv", [s](auto x) { return s / x; });
}
Tensor pow(const Tensor& a, double e) {
  if (e == 2.0) return arith_scalar(a, "pow", [](auto x) { return x * x; });
  return arith_scalar(a, "pow", [e](auto x) { return std::pow(x, e); });
}
Tensor maximum(const Tensor& a, double s) {
  return arith_scalar(a, "maximum", [s](auto x) { return max_nan<double>(x, s); });
}
Tensor minimum(const Tensor& a, double s) {
  return arith_scalar(a, "minimum", [s](auto x) { return min_nan<double>(x, s); });
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare(a, b, "eq", [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ne", [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "lt", [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare(a, b, "le", [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "gt", [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ge", [](auto x, auto y) { return x >= y; });
}
Tensor eq(const Tensor& a, double s) {
  return compare_scalar(a, s, "eq", [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, double s) {
  return compare_scalar(a, s, "ne", [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, double s) {
  return compare_scalar(a, s, "lt", [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, double s) {
  return compare_scalar(a, s, "le", [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, double s) {
  return compare_scalar(a, s, "gt", [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, double s) {
  return compare_scalar(a, s, "ge", [](auto x, auto y) { return x >= y; });
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_mask(a, "logical_and");
  check_mask(b, "logical_and");
  return binary_kernel<uint8_t, uint8_t>(
      a, b, [](uint8_t x, uint8_t y) { return uint8_t(x && y); }, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_mask(a, "logical_or");
  check_mask(b, "logical_or");
  return binary_kernel<uint8_t, uint8_t>(
      a, b, [](uint8_t x, uint8_t y) { return uint8_t(x || y); }, "logical_or");
}
Tensor logical_not(const Tensor& a) {
  check_mask(a, "logical_not");
  return unary_kernel<uint8_t, uint8_t>(a, [](uint8_t x) { return uint8_t(!x); });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_mask(cond, "where");
  check_same_dtype(a, b, "where");
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  const Tensor c = cond.expand(shape), x = a.expand(shape), y = b.expand(shape);
  Tensor out = empty(shape, a.dtype());
  visit_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = out.data<T>();
    const uint8_t* pc = c.data<uint8_t>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    detail::for_each_row<4>(shape, {&out.strides(), &c.strides(), &x.strides(), &y.strides()},
                            [&](auto base, int64_t n, auto st) {
                              for (int64_t j = 0; j < n; ++j)
                                o[base[0] + j * st[0]] = pc[base[1] + j * st[1]]
                                                             ? px[base[2] + j * st[2]]
                                                             : py[base[3] + j * st[3]];
                            });
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_mask(mask, "masked_fill");
  QKV_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(), "masked_fill",
            "mask ", mask.shape(), " does not broadcast to ", x.shape());
  return where(mask, full({}, value, x.dtype()), x);
}

Tensor neg(const Tensor& x) {
  return arith_scalar(x, "neg", [](auto v) { return -v; });
}
Tensor abs(const Tensor& x) {
  return arith_scalar(x, "abs", [](auto v) { return v < 0 ? -v : v; });
}
Tensor sign(const Tensor& x) {
  return arith_scalar(x, "sign", [](auto v) { return (v > 0) - (v < 0); });
}
Tensor exp(const Tensor& x) {
  return float_map(x, "exp", [](auto v) { return std::exp(v); });
}
Tensor log(const Tensor& x) {
  return float_map(x, "log", [](auto v) { return std::log(v); });
}
Tensor sqrt(const Tensor& x) {
  return float_map(x, "sqrt", [](auto v) { return std::sqrt(v); });
}
Tensor rsqrt(const Tensor& x) {
  return float_map(x, "rsqrt", [](auto v) { return 1 / std::sqrt(v); });
}
Tensor tanh(const Tensor& x) {
  return float_map(x, "tanh", [](auto v) { return std::tanh(v); });
}
Tensor sigmoid(const Tensor& x) {
  return float_map(x, "sigmoid", [](auto v) {
    using T = decltype(v);
    // Split by sign so exp never overflows.
    if (v >= 0) return T(1) / (T(1) + std::exp(-v));
    const T e = std::exp(v);
    return e / (T(1) + e);
  });
}
// NaN passes through (v < 0 is false), so a diverging run stays visible.
Tensor relu(const Tensor& x) {
  return float_map(x, "relu", [](auto v) { return v < 0 ? decltype(v)(0) : v; });
}
Tensor gelu(const Tensor& x) {
  // x Phi(x), Phi from erfc: unlike 1 + erf(x / sqrt 2), no cancellation for x << 0.
  return float_map(x, "gelu", [](auto v) { return v * kernel::normal_cdf(v); });
}
Tensor gelu_grad(const Tensor& x) {
  return float_map(x, "gelu_grad", [](auto v) {
    return kernel::mul_add(v, kernel::normal_pdf(v), kernel::normal_cdf(v));  // as gelu_backward
  });
}
Tensor isfinite(const Tensor& x) {
  check_float(x, "isfinite");
  return visit_float(x.dtype(), "isfinite", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return unary_kernel<T, uint8_t>(x, [](T v) { return uint8_t(std::isfinite(v)); });
  });
}
bool all_finite(const Tensor& x) {
  if (!is_floating(x.dtype())) return true;
  const Tensor f = isfinite(x);
  const uint8_t* p = f.data<uint8_t>();
  for (int64_t i = 0, n = f.numel(); i < n; ++i)
    if (!p[i]) return false;
  return true;
}

Tensor relu_backward(const Tensor& y, const Tensor& g) {
  check_float(y, "relu_backward");
  check_same_dtype(y, g, "relu_backward");
  QKV_CHECK(y.shape() == g.shape(), "relu_backward", "output ", y.shape(), " and gradient ",
            g.shape(), " differ");
  return visit_float(y.dtype(), "relu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return binary_kernel<T, T>(
        y, g, [](T yv, T gv) { return yv > T(0) ? gv : T(0); }, "relu_backward");
  });
}

// The elementwise loops below read contiguous buffers through restrict pointers, so GCC
// vectorizes them without alias checks (normal_cdf's division and fast_exp included).

// r = relu(x) as relu writes it (NaN passes, -0 stays -0), y = r * r; r only when kept.
ReluSquaredResult relu_squared_forward(const Tensor& x_in, bool keep_relu) {
  check_float(x_in, "relu_squared_forward");
  const Tensor x = x_in.contiguous();
  ReluSquaredResult f{empty(x.shape(), x.dtype()),
                      keep_relu ? empty(x.shape(), x.dtype()) : Tensor()};
  visit_float(x.dtype(), "relu_squared_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* __restrict px = x.data<T>();
    T* __restrict py = f.y.data<T>();
    T* __restrict pr = keep_relu ? f.r.data<T>() : nullptr;
    parallel_for(x.numel(), 1, [&](int64_t lo, int64_t hi) {
      if (pr) {
        for (int64_t j = lo; j < hi; ++j) {
          const T r = px[j] < T(0) ? T(0) : px[j];
          pr[j] = r;
          py[j] = r * r;
        }
      } else {
        for (int64_t j = lo; j < hi; ++j) {
          const T r = px[j] < T(0) ? T(0) : px[j];
          py[j] = r * r;
        }
      }
    });
  });
  return f;
}

Tensor relu_squared_backward(const Tensor& g_in, const Tensor& r_in) {
  check_float(r_in, "relu_squared_backward");
  check_same_dtype(g_in, r_in, "relu_squared_backward");
  QKV_CHECK(g_in.shape() == r_in.shape(), "relu_squared_backward", "gradient ", g_in.shape(),
            " and relu output ", r_in.shape(), " differ");
  const Tensor g = g_in.contiguous(), r = r_in.contiguous();
  Tensor dx = empty(r.shape(), r.dtype());
  visit_float(r.dtype(), "relu_squared_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* __restrict pg = g.data<T>();
    const T* __restrict pr = r.data<T>();
    T* __restrict pd = dx.data<T>();
    parallel_for(r.numel(), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) {
        // 2 (g r), not g r + g r: the same bits (doubling is exact), no sum an FMA could take.
        // Computed for every j and then selected: a load under the condition would not vectorize.
        const T d = T(2) * (pg[j] * pr[j]);
        pd[j] = pr[j] > T(0) ? d : T(0);
      }
    });
  });
  return dx;
}

GeluResult gelu_forward(const Tensor& x_in) {
  check_float(x_in, "gelu_forward");
  const Tensor x = x_in.contiguous();
  GeluResult r{empty(x.shape(), x.dtype()), empty(x.shape(), x.dtype())};
  visit_float(x.dtype(), "gelu_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* __restrict px = x.data<T>();
    T* __restrict py = r.y.data<T>();
    T* __restrict pc = r.cdf.data<T>();
    parallel_for(x.numel(), 16, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) {
        const T c = kernel::normal_cdf(px[j]);
        pc[j] = c;
        py[j] = px[j] * c;
      }
    });
  });
  return r;
}

Tensor gelu_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& cdf_in) {
  check_float(x_in, "gelu_backward");
  check_same_dtype(g_in, x_in, "gelu_backward");
  check_same_dtype(cdf_in, x_in, "gelu_backward");
  QKV_CHECK(g_in.shape() == x_in.shape() && cdf_in.shape() == x_in.shape(), "gelu_backward",
            "gradient ", g_in.shape(), ", input ", x_in.shape(), " and Phi ", cdf_in.shape(),
            " differ");
  const Tensor g = g_in.contiguous(), x = x_in.contiguous(), cdf = cdf_in.contiguous();
  Tensor dx = empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "gelu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* __restrict pg = g.data<T>();
    const T* __restrict px = x.data<T>();
    const T* __restrict pc = cdf.data<T>();
    T* __restrict pd = dx.data<T>();
    parallel_for(x.numel(), 8, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) {
        const T slope = kernel::mul_add(px[j], kernel::normal_pdf(px[j]), pc[j]);  // as gelu_grad
        pd[j] = pg[j] * slope;
      }
    });
  });
  return dx;
}

}  // namespace qkv
