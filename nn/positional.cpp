#include "nn/positional.hpp"

#include <cmath>

namespace qkv::nn {

Tensor sinusoidal_table(int64_t n, int64_t d, DType dt, int64_t offset) {
  Tensor t = empty({n, d}, DType::f64);
  double* p = t.data<double>();
  for (int64_t pos = 0; pos < n; ++pos)
    for (int64_t i = 0; i < d; i += 2) {
      // 10000^(2i/d) with i counting pairs; here i is already the even index 2i.
      const double angle = static_cast<double>(pos + offset) /
                           std::pow(10000.0, static_cast<double>(i) / static_cast<double>(d));
      p[pos * d + i] = std::sin(angle);
      if (i + 1 < d) p[pos * d + i + 1] = std::cos(angle);
    }
  return t.to(dt);
}

PositionKind parse_position(const std::string& name) {
  return parse_name<PositionKind>(name, "position");
}

PositionalEncoding::PositionalEncoding(PositionKind k, int64_t d_, int64_t n, Generator& gen,
                                       double p, std::shared_ptr<Generator> dropout_gen)
    : kind(k), d(d_), n_max(n) {
  if (kind == PositionKind::learned) {
    QKV_CHECK(n > 0, "PositionalEncoding", "learned positions need max_len > 0, got ", n);
    table = register_parameter("weight", mul(randn({n, d}, gen), 0.02));
  }
  dropout = register_module("dropout", std::make_shared<Dropout>(p, std::move(dropout_gen)));
}

Var PositionalEncoding::forward(const Var& x, int64_t offset) const {
  QKV_CHECK(x.dim() == 3 && x.size(2) == d, "PositionalEncoding", "input ", x.shape(),
            " is not (B, n, ", d, ")");
  const int64_t n = x.size(1);
  Var out = x;
  if (kind == PositionKind::sinusoidal) {
    Tensor rows;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!cache_.defined() || cache_.size(0) < offset + n || cache_.dtype() != x.dtype())
        cache_ = sinusoidal_table(std::max<int64_t>(2 * (offset + n), 64), d, x.dtype());
      rows = cache_.narrow(0, offset, n);
    }
    out = ag::add(x, ag::constant(rows));
  } else if (kind == PositionKind::learned) {
    QKV_CHECK(offset + n <= n_max, "PositionalEncoding", "sequence of length ", offset + n,
              " is longer than the learned table's max_len ", n_max);
    out = ag::add(x, ag::narrow(table, 0, offset, n));
  }
  return dropout->forward(out);
}

}  // namespace qkv::nn
