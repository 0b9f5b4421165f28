// Tensors in tests: slow, obviously-correct references built on Tensor::at, layouts that hold
// the same values with different strides (so every op is checked on non-contiguous inputs
// against the same expected values), float64 leaves, error measures and padding masks.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "autograd/var.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"
#include "support/common.hpp"

namespace qkv::testing {

// f(index) for every index of shape s, row-major. A 0-d shape has one (empty) index.
template <class F>
void for_each_index(const Shape& s, F&& f) {
  if (numel_of(s) == 0) return;
  Shape idx(s.size(), 0);
  while (true) {
    f(static_cast<const Shape&>(idx));
    int64_t d = static_cast<int64_t>(s.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// t's element at an index of a shape t broadcasts to (NumPy rules: align right, size 1 -> 0).
inline double at_bcast(const Tensor& t, const Shape& idx) {
  const size_t lead = idx.size() - static_cast<size_t>(t.dim());
  Shape i(t.dim());
  for (size_t d = 0; d < i.size(); ++d)
    i[d] = t.size(static_cast<int64_t>(d)) == 1 ? 0 : idx[d + lead];
  return t.at(i);
}

// A float64 tensor of shape s with ref[idx] = f(idx), built element by element.
inline Tensor build(const Shape& s, const std::function<double(const Shape&)>& f) {
  Tensor out = zeros(s, DType::f64);
  double* p = out.data<double>();
  int64_t k = 0;
  for_each_index(s, [&](const Shape& idx) { p[k++] = f(idx); });
  return out;
}

// Same values as x, different memory layouts.
enum class Layout { contiguous, transposed, stepped, offset };
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous:
      return "contiguous";
    case Layout::transposed:
      return "transposed";
    case Layout::stepped:
      return "sliced with step";
    default:
      return "offset narrow";
  }
}
constexpr Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::stepped,
                               Layout::offset};

inline Tensor with_layout(const Tensor& x, Layout l) {
  if (x.dim() == 0 || l == Layout::contiguous) return x.contiguous();
  if (l == Layout::transposed) {
    // Dims stored in reverse order: strides increase left to right.
    Shape rev(x.dim());
    for (int64_t d = 0; d < x.dim(); ++d) rev[d] = x.dim() - 1 - d;
    return x.permute(rev).contiguous().permute(rev);
  }
  Shape big = x.shape();
  if (l == Layout::stepped) {
    for (int64_t& n : big) n = 2 * n + 1;  // every other element, along every dim
    Tensor base = full(big, -777.0, x.dtype());
    Tensor v = base;
    for (int64_t d = 0; d < x.dim(); ++d) v = v.slice(d, 1, 2 * x.size(d) + 1, 2);
    v.copy_(x);
    return v;
  }
  big.back() += 5;  // a narrow at an offset: rows have gaps
  Tensor base = full(big, -777.0, x.dtype());
  Tensor v = base.narrow(-1, 3, x.size(-1));
  v.copy_(x);
  return v;
}

// A float tensor of normal values, rounded to dt.
inline Tensor randn_t(const Shape& s, uint64_t seed, DType dt) {
  Generator g(seed);
  return randn(s, g, dt);
}

// |got - want| <= atol + rtol * |want| elementwise (NaN only matches NaN, inf only equal inf).
inline bool close_ref(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.shape() != want.shape()) return false;
  bool ok = true;
  for_each_index(got.shape(), [&](const Shape& i) {
    const double g = got.at(i), w = want.at(i);
    if (std::isnan(w))
      ok = ok && std::isnan(g);
    else if (std::isinf(w))
      ok = ok && g == w;
    else
      ok = ok && std::abs(g - w) <= atol + rtol * std::abs(w);
  });
  return ok;
}

// Tolerances for results computed in dt against a float64 reference.
inline double rtol_for(DType dt) { return dt == DType::f32 ? 2e-6 : 1e-13; }

inline bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.storage().get() == b.storage().get();
}

// True when calling f throws qkv::Error whose message contains every one of parts.
#define CHECK_ERROR_MENTIONS(expr, ...)               \
  do {                                                \
    bool thrown_ = false;                             \
    try {                                             \
      (void)(expr);                                   \
    } catch (const ::qkv::Error& e_) {                \
      thrown_ = true;                                 \
      const std::string msg_ = e_.what();             \
      INFO("message: " << msg_);                      \
      for (const char* part_ : {__VA_ARGS__}) {       \
        INFO("expected to mention: " << part_);       \
        CHECK(msg_.find(part_) != std::string::npos); \
      }                                               \
    }                                                 \
    INFO("expression: " #expr);                       \
    CHECK(thrown_);                                   \
  } while (0)

// Bitwise equality (NaN-safe, -0 != +0).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.numel() * dtype_size(x.dtype())) == 0;
}

// A leaf of the given shape, uniform in [lo, hi), that requires grad.
inline ag::Var leaf(const Shape& s, Generator& g, DType dt = DType::f64, double lo = -1,
                    double hi = 1) {
  return ag::Var(uniform(s, lo, hi, g, dt), true);
}

// max|a - b| / max|b|: the relative error of a whole tensor against a reference b.
// When b is all zeros this is max|a - b| (relative to 1).
inline double rel_err(const Tensor& a, const Tensor& b) {
  const double den = max(abs(b.to(DType::f64))).item();
  const double num = max_abs_diff(a.to(DType::f64), b.to(DType::f64));
  return num / (den > 0 ? den : 1.0);
}

// Rotary positions' tables, the tests' own reference: cos and sin of (p + offset) 10000^(-2i/d)
// for p < n, i < d/2, as nn::rotary_tables builds them.
inline std::pair<Tensor, Tensor> rope_tables(int64_t n, int64_t d, int64_t offset, DType dt) {
  Tensor c = empty({n, d / 2}, DType::f64), s = empty({n, d / 2}, DType::f64);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = double(p + offset) * std::pow(10000.0, -2.0 * double(i) / double(d));
      c.data<double>()[p * (d / 2) + i] = std::cos(a);
      s.data<double>()[p * (d / 2) + i] = std::sin(a);
    }
  return {c.to(dt), s.to(dt)};
}

}  // namespace qkv::testing
