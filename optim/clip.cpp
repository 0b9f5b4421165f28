#include "clip.hpp"

#include <algorithm>
#include <cmath>

#include "core/parallel.hpp"

namespace qkv::optim {
namespace {

// Block size of the norm's partial sums: fixed, so the summation order never depends on
// the thread count.
constexpr int64_t kBlock = 4096;
constexpr int64_t kLanes = 8;

std::vector<Var> vars_of(const NamedParams& params) {
  std::vector<Var> out;
  for (const auto& np : params) out.push_back(np.second);
  return out;
}

// The gradient of p, packed, or undefined; checks it matches the parameter.
const Tensor& checked_grad(Var& p, const char* op) {
  QKV_CHECK(p.defined(), op, "undefined parameter");
  Tensor& g = p.grad();
  if (!g.defined()) return g;
  QKV_CHECK(g.shape() == p.shape() && is_floating(g.dtype()), op, "gradient of shape ", g.shape(),
            " ", dtype_name(g.dtype()), " for a parameter of shape ", p.shape());
  if (!g.is_contiguous()) g = g.contiguous();
  return g;
}

double sum_squares(const Tensor& g) {
  return visit_float(g.dtype(), "grad_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = g.data<T>();
    const int64_t n = g.numel(), blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> partial(static_cast<size_t>(blocks));
    parallel_for(blocks, kBlock, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        // Eight running sums (a fixed order, so still deterministic) keep the adds from
        // waiting on each other and let them vectorize.
        double acc[kLanes] = {};
        const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
        int64_t i = begin;
        for (; i + kLanes <= end; i += kLanes)
          for (int64_t j = 0; j < kLanes; ++j) {
            const double xv = static_cast<double>(x[i + j]);
            acc[j] += xv * xv;
          }
        for (; i < end; ++i) acc[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
        double s = 0;
        for (double a : acc) s += a;
        partial[static_cast<size_t>(b)] = s;
      }
    });
    double s = 0;
    for (double v : partial) s += v;
    return s;
  });
}

template <class F>
void for_each_element(const Tensor& g, F&& f) {
  visit_float(g.dtype(), "clip", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* x = g.data<T>();
    parallel_for(g.numel(), 2, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) x[i] = f(x[i]);
    });
  });
}

}  // namespace

double grad_norm(const std::vector<Var>& params) {
  double s = 0;
  for (Var p : params) {
    const Tensor& g = checked_grad(p, "grad_norm");
    if (g.defined()) s += sum_squares(g);
  }
  return std::sqrt(s);
}

double grad_norm(const NamedParams& params) { return grad_norm(vars_of(params)); }

double clip_grad_norm(const std::vector<Var>& params, double max_norm) {
  QKV_CHECK(max_norm > 0, "clip_grad_norm", "max_norm must be > 0, got ", max_norm);
  const double norm = grad_norm(params);
  const double coef = max_norm / (norm + 1e-6);
  if (!std::isfinite(norm) || coef >= 1) return norm;
  for (Var p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    for_each_element(g, [coef](auto v) { return v * static_cast<decltype(v)>(coef); });
  }
  return norm;
}

double clip_grad_norm(const NamedParams& params, double max_norm) {
  return clip_grad_norm(vars_of(params), max_norm);
}

void clip_grad_value(const std::vector<Var>& params, double clip_value) {
  QKV_CHECK(clip_value > 0, "clip_grad_value", "clip_value must be > 0, got ", clip_value);
  for (Var p : params) {
    const Tensor& g = checked_grad(p, "clip_grad_value");
    if (!g.defined()) continue;
    for_each_element(g, [clip_value](auto v) {
      using T = decltype(v);
      const T c = static_cast<T>(clip_value);
      return std::min(std::max(v, -c), c);
    });
  }
}

void clip_grad_value(const NamedParams& params, double clip_value) {
  clip_grad_value(vars_of(params), clip_value);
}

void scale_grads(const std::vector<Var>& params, double factor) {
  for (Var p : params) {
    const Tensor& g = checked_grad(p, "scale_grads");
    if (!g.defined()) continue;
    for_each_element(g, [factor](auto v) { return v * static_cast<decltype(v)>(factor); });
  }
}

}  // namespace qkv::optim
