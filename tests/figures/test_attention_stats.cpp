// Statistics of attention rows (figures/attention_stats.hpp) against their definitions and
// against autograd's softmax Jacobian.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "autograd/ops.hpp"
#include "core/random.hpp"
#include "figures/attention_stats.hpp"
#include "interp/head_scores.hpp"

using namespace qkv;
using namespace qkv::figures;

TEST_CASE("row statistics and the softmax Jacobian norm against autograd") {
  Generator g(3);
  const Tensor logits = mul(randn({5, 6}, g, DType::f64), 2.0);
  const Tensor p = softmax(logits, 1);
  const RowStats s = row_stats(p);
  double jac = 0, ent = 0, top = 0;
  for (int64_t i = 0; i < 5; ++i) {
    // the Jacobian of softmax row i, row by row: d p_a / d z = grad of p_a
    ag::Var z(logits.select(0, i).contiguous().clone(), true);
    const ag::Var pz = ag::softmax(z, 0);
    double fro = 0;
    for (int64_t a = 0; a < 6; ++a) {
      Tensor e = zeros({6}, DType::f64);
      e.data<double>()[a] = 1;
      const Tensor row = ag::grad({pz}, {e}, {z}, true)[0];
      fro += qkv::sum(mul(row, row)).item();
    }
    jac += std::sqrt(fro) / 5;
    double h = 0, m = 0;
    for (int64_t j = 0; j < 6; ++j) {
      const double v = p.at({i, j});
      h -= v * std::log(v);
      m = std::max(m, v);
    }
    ent += h / 5, top += m / 5;
  }
  CHECK(s.jacobian_norm == Approx(jac).epsilon(1e-9));
  CHECK(s.mean_entropy == Approx(ent).epsilon(1e-12));
  CHECK(s.mean_max_weight == Approx(top).epsilon(1e-12));
  // uniform rows: entropy log m, Jacobian norm sqrt(1/m - 2/m^2 + 1/m^2); one-hot rows: 0
  const RowStats u = row_stats(full({2, 4}, 0.25, DType::f64));
  CHECK(u.mean_entropy == Approx(std::log(4.0)));
  CHECK(u.jacobian_norm == Approx(std::sqrt(0.25 - 2.0 / 16 + 1.0 / 16)));
  CHECK(u.saturated_fraction == 0);
  const RowStats o = row_stats(tensor({0, 1, 0, 1, 0, 0}, {2, 3}, DType::f64));
  CHECK(o.mean_entropy == 0);
  CHECK(o.jacobian_norm == 0);
  CHECK(o.saturated_fraction == 1);
  CHECK_THROWS_AS(row_stats(zeros({3}, DType::f64)), Error);
}

TEST_CASE("a layer's attention entropy is the mean of its heads' entropy scores") {
  Generator g(4);
  // causal, with the second sequence's last two keys and its first query masked
  Tensor allowed = zeros({2, 1, 5, 5}, DType::b8);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j <= i; ++j)
        allowed.data<uint8_t>()[(b * 5 + i) * 5 + j] = b == 0 || (i > 0 && j < 3);
  const Tensor logits = randn({2, 3, 5, 5}, g, DType::f64);
  const Tensor p = softmax(where(allowed, logits, full({}, -INFINITY, DType::f64)), -1);
  const std::vector<double> heads = interp::score_entropy({.pattern = p}, {});
  const double layer = attention_entropy({ag::Var(p)})[0];
  CHECK(layer == Approx((heads[0] + heads[1] + heads[2]) / 3).epsilon(1e-14));
  CHECK(layer > 0);
}
