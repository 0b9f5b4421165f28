// ag::attention (the fused kernel) against central differences in float64, and against the
// same attention composed from matmul, masked_fill and softmax in float32.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.hpp"
#include "autograd/ops.hpp"

using namespace qkv;
using namespace qkv::ag;

namespace {

Var composed(const Var& q, const Var& k, const Var& v, const Tensor& mask, double scale) {
  Var s = mul(matmul(q, transpose(k, -2, -1)), scale);
  if (mask.defined()) s = masked_fill(s, logical_not(mask), -INFINITY);
  return matmul(softmax(s, -1), v);
}

// (B, 1, 1, m) key padding with batch entry 1 fully masked, AND a causal (n, m) mask.
Tensor test_mask(int64_t B, int64_t n, int64_t m) {
  Tensor pad = ones({B, 1, 1, m}, DType::b8);
  pad.select(0, 1).zero_();
  pad.select(0, 0).narrow(-1, m - 1, 1).zero_();
  const Tensor causal = le(arange(m).unsqueeze(0), add(arange(n).unsqueeze(1), m - n));
  return logical_and(pad, causal);
}

}  // namespace

TEST_CASE("gradcheck: fused attention, unmasked and masked with fully masked rows") {
  Generator g(21);
  auto leaf = [&](const Shape& s) { return Var(uniform(s, -1, 1, g, DType::f64), true); };
  for (const bool masked : {false, true}) {
    const Tensor mask = masked ? test_mask(2, 3, 4) : Tensor();
    const GradcheckReport r = gradcheck(
        [&](const std::vector<Var>& in) { return attention(in[0], in[1], in[2], mask, 0.7); },
        {leaf({2, 2, 3, 5}), leaf({2, 2, 4, 5}), leaf({2, 2, 4, 3})});
    INFO(r.summary());
    CHECK(r.passed);
  }
}

TEST_CASE("fused attention matches the composed ops in float32, values and gradients") {
  Generator g(22);
  const int64_t B = 2, H = 4, n = 40, m = 70, d = 16;
  const Tensor mask = test_mask(B, n, m);
  const Tensor qd = randn({B, H, n, d}, g), kd = randn({B, H, m, d}, g),
               vd = randn({B, H, m, d}, g);
  const Tensor go = randn({B, H, n, d}, g);
  const Var q1(qd, true), k1(kd, true), v1(vd, true), q2(qd, true), k2(kd, true), v2(vd, true);
  const Var a = attention(q1, k1, v1, mask, 0.25);
  const Var b = composed(q2, k2, v2, mask, 0.25);
  CHECK(max_abs_diff(a.data(), b.data()) < 1e-5);
  const std::vector<Tensor> ga = grad({a}, {go}, {q1, k1, v1});
  const std::vector<Tensor> gb = grad({b}, {go}, {q2, k2, v2});
  for (size_t i = 0; i < 3; ++i) {
    INFO("input " << i);
    CHECK(max_abs_diff(ga[i], gb[i]) < 1e-5);
    CHECK(all_finite(ga[i]));
  }
  // Batch entry 1 attends to nothing: zero output and zero gradients.
  CHECK(max_abs_diff(a.data().select(0, 1), zeros({H, n, d})) == 0);
  CHECK(max_abs_diff(ga[0].select(0, 1), zeros({H, n, d})) == 0);
  CHECK(max_abs_diff(ga[1].select(0, 1), zeros({H, m, d})) == 0);
}
