// Elementwise ops and their derivatives. Broadcast inputs get their gradient summed back to
// their own shape (sum_to), which is the derivative of an expand.
#include "autograd/ops.hpp"

namespace qkv::ag {

Var add(const Var& a, const Var& b) {
  return record("add", qkv::add(a.data(), b.data()), {a, b},
                [sa = a.shape(), sb = b.shape()](const Tensor& g) -> std::vector<Tensor> {
                  return {sum_to(g, sa), sum_to(g, sb)};
                });
}

Var sub(const Var& a, const Var& b) {
  return record("sub", qkv::sub(a.data(), b.data()), {a, b},
                [sa = a.shape(), sb = b.shape()](const Tensor& g) -> std::vector<Tensor> {
                  return {sum_to(g, sa), sum_to(qkv::neg(g), sb)};
                });
}

Var mul(const Var& a, const Var& b) {
  return record("mul", qkv::mul(a.data(), b.data()), {a, b},
                [a_ = a.data(), b_ = b.data(), ra = a.requires_grad(),
                 rb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  // d(ab)/da = b, d(ab)/db = a
                  return {ra ? sum_to(qkv::mul(g, b_), a_.shape()) : Tensor(),
                          rb ? sum_to(qkv::mul(g, a_), b_.shape()) : Tensor()};
                });
}

Var div(const Var& a, const Var& b) {
  return record("div", qkv::div(a.data(), b.data()), {a, b},
                [a_ = a.data(), b_ = b.data(), ra = a.requires_grad(),
                 rb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
                  const Tensor gb = qkv::div(g, b_);
                  return {
                      ra ? sum_to(gb, a_.shape()) : Tensor(),
                      rb ? sum_to(qkv::neg(qkv::mul(gb, qkv::div(a_, b_))), b_.shape()) : Tensor()};
                });
}

Var maximum(const Var& a, const Var& b) {
  const Tensor a_wins = ge(a.data(), b.data());  // ties go to a
  return record(
      "maximum", qkv::maximum(a.data(), b.data()), {a, b},
      [a_wins, sa = a.shape(), sb = b.shape()](const Tensor& g) -> std::vector<Tensor> {
        const Tensor zero = zeros({}, g.dtype());
        return {sum_to(qkv::where(a_wins, g, zero), sa), sum_to(qkv::where(a_wins, zero, g), sb)};
      });
}

Var add(const Var& a, double s) {
  return record("add_scalar", qkv::add(a.data(), s), {a},
                [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
}

Var mul(const Var& a, double s) {
  return record("mul_scalar", qkv::mul(a.data(), s), {a},
                [s](const Tensor& g) -> std::vector<Tensor> { return {qkv::mul(g, s)}; });
}

Var rsub(double s, const Var& a) {
  return record("rsub", qkv::rsub(s, a.data()), {a},
                [](const Tensor& g) -> std::vector<Tensor> { return {qkv::neg(g)}; });
}

Var neg(const Var& a) {
  return record("neg", qkv::neg(a.data()), {a},
                [](const Tensor& g) -> std::vector<Tensor> { return {qkv::neg(g)}; });
}

Var pow(const Var& a, double e) {
  return record("pow", qkv::pow(a.data(), e), {a},
                [a_ = a.data(), e](const Tensor& g) -> std::vector<Tensor> {
                  // d(a^e)/da = e a^(e-1)
                  return {qkv::mul(g, qkv::mul(qkv::pow(a_, e - 1), e))};
                });
}

Var exp(const Var& a) {
  Tensor y = qkv::exp(a.data());
  return record("exp", y, {a},
                [y](const Tensor& g) -> std::vector<Tensor> { return {qkv::mul(g, y)}; });
}

Var log(const Var& a) {
  return record(
      "log", qkv::log(a.data()), {a},
      [a_ = a.data()](const Tensor& g) -> std::vector<Tensor> { return {qkv::div(g, a_)}; });
}

Var sqrt(const Var& a) {
  Tensor y = qkv::sqrt(a.data());
  return record("sqrt", y, {a}, [y](const Tensor& g) -> std::vector<Tensor> {
    // d sqrt(a)/da = 1 / (2 sqrt(a))
    return {qkv::div(g, qkv::mul(y, 2.0))};
  });
}

Var rsqrt(const Var& a) {
  Tensor y = qkv::rsqrt(a.data());
  return record("rsqrt", y, {a}, [y](const Tensor& g) -> std::vector<Tensor> {
    // d a^(-1/2)/da = -1/2 a^(-3/2) = -y^3 / 2
    return {qkv::mul(g, qkv::mul(qkv::mul(y, qkv::mul(y, y)), -0.5))};
  });
}

Var abs(const Var& a) {
  return record("abs", qkv::abs(a.data()), {a},
                [a_ = a.data()](const Tensor& g) -> std::vector<Tensor> {
                  return {qkv::mul(g, qkv::sign(a_))};  // 0 at 0, as torch
                });
}

Var where(const Tensor& cond, const Var& a, const Var& b) {
  return record(
      "where", qkv::where(cond, a.data(), b.data()), {a, b},
      [cond, sa = a.shape(), sb = b.shape()](const Tensor& g) -> std::vector<Tensor> {
        const Tensor zero = zeros({}, g.dtype());
        return {sum_to(qkv::where(cond, g, zero), sa), sum_to(qkv::where(cond, zero, g), sb)};
      });
}

Var masked_fill(const Var& x, const Tensor& mask, double value) {
  return record(
      "masked_fill", qkv::masked_fill(x.data(), mask, value), {x},
      [mask](const Tensor& g) -> std::vector<Tensor> { return {qkv::masked_fill(g, mask, 0.0)}; });
}

}  // namespace qkv::ag
