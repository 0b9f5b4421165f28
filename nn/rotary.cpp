#include "nn/rotary.hpp"

#include <cmath>

namespace qkv::nn {

std::pair<Tensor, Tensor> rotary_tables(int64_t n, int64_t d, int64_t offset, DType dt,
                                        double base) {
  QKV_CHECK(n >= 0 && d > 0 && d % 2 == 0 && offset >= 0, "rotary", "needs an even width and ",
            "non-negative positions, got n = ", n, ", d = ", d, ", offset = ", offset);
  const int64_t half = d / 2;
  Tensor c = empty({n, half}, DType::f64), s = empty({n, half}, DType::f64);
  double* pc = c.data<double>();
  double* ps = s.data<double>();
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p + offset) *
                       std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      pc[p * half + i] = std::cos(a);
      ps[p * half + i] = std::sin(a);
    }
  return {c.to(dt), s.to(dt)};
}

ag::Var rotary(const ag::Var& x, int64_t offset, double base) {
  QKV_CHECK(x.dim() >= 2 && x.size(-1) % 2 == 0, "rotary", "input ", x.shape(),
            " is not (..., n, d) with d even");
  const auto [c, s] = rotary_tables(x.size(-2), x.size(-1), offset, x.dtype(), base);  // (n, d/2)
  return ag::rotary(x, c, s);
}

}  // namespace qkv::nn
