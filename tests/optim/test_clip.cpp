// Gradient clipping: the returned norm and the clipped gradients.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/parallel.hpp"
#include "core/random.hpp"
#include "optim/clip.hpp"

using namespace qkv;
using namespace qkv::optim;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

namespace {
Var with_grad(const Tensor& g) {
  Var p = leaf(zeros(g.shape(), g.dtype()));
  p.grad() = g.clone();
  return p;
}
}  // namespace

TEST_CASE("clip_grad_norm returns the norm before clipping and scales to max_norm",
          "[optim][clip]") {
  // ||(3, 4, 12)|| = 13 over two parameters; a third has no gradient.
  Var a = with_grad(tensor({3, 4}, {2}, DType::f64));
  Var b = with_grad(tensor({12}, {1, 1}, DType::f64));
  Var none = leaf(ones({5}, DType::f64));
  const double norm = clip_grad_norm(std::vector<Var>{a, b, none}, 6.5);
  CHECK(norm == Approx(13.0).epsilon(1e-15));
  const double coef = 6.5 / (13.0 + 1e-6);  // as torch.nn.utils.clip_grad_norm_
  CHECK(a.grad().at({0}) == Approx(3 * coef).epsilon(1e-15));
  CHECK(a.grad().at({1}) == Approx(4 * coef).epsilon(1e-15));
  CHECK(b.grad().at({0, 0}) == Approx(12 * coef).epsilon(1e-15));
  CHECK(!none.grad().defined());
  CHECK(grad_norm({a, b}) == Approx(6.5).epsilon(1e-6));  // now at the threshold
}

TEST_CASE("clip_grad_norm leaves gradients below max_norm untouched", "[optim][clip]") {
  Var a = with_grad(tensor({0.3, -0.4}, {2}));
  const Tensor before = a.grad().clone();
  CHECK(clip_grad_norm(NamedParams{{"a", a}}, 1.0) == Approx(0.5).epsilon(1e-7));
  CHECK(max_abs_diff(a.grad(), before) == 0.0);
}

TEST_CASE("clip_grad_norm on large float32 gradients matches a double sum, at any thread count",
          "[optim][clip]") {
  Generator gen(7);
  const Tensor g1 = randn({300, 257}, gen), g2 = randn({1001}, gen);
  double s = 0;
  for (const Tensor& g : {g1, g2})
    for (float v : to_vector<float>(g)) s += static_cast<double>(v) * v;
  const double expect = std::sqrt(s);

  double norms[2];
  std::vector<float> clipped[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Var a = with_grad(g1), b = with_grad(g2);
    norms[threads - 1] = clip_grad_norm(std::vector<Var>{a, b}, 10.0);
    clipped[threads - 1] = to_vector<float>(a.grad());
    const double coef = 10.0 / (norms[threads - 1] + 1e-6);
    CHECK(max_abs_diff(a.grad(), mul(g1, static_cast<float>(coef))) == 0.0);
    CHECK(max_abs_diff(b.grad(), mul(g2, static_cast<float>(coef))) == 0.0);
    CHECK(grad_norm({a, b}) == Approx(10.0).epsilon(1e-5));
  }
  set_num_threads(0);
  CHECK(norms[0] == Approx(expect).epsilon(1e-12));
  CHECK(norms[0] == norms[1]);  // bit-identical
  CHECK(clipped[0] == clipped[1]);
}

TEST_CASE("clip_grad_norm with a non-finite gradient returns it and leaves the gradients",
          "[optim][clip]") {
  Var a = with_grad(tensor({1.0, std::numeric_limits<double>::infinity()}, {2}));
  Var b = with_grad(tensor({5.0}, {1}));
  CHECK(std::isinf(clip_grad_norm(std::vector<Var>{a, b}, 1.0)));
  CHECK(b.grad().at({0}) == 5.0);
}

TEST_CASE("clip_grad_value clamps each element", "[optim][clip]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Var a = with_grad(tensor({-3, -0.5, 0, 0.25, 2, nan}, {2, 3}));
  Var none = leaf(ones({2}));
  clip_grad_value(std::vector<Var>{a, none}, 1.0);
  const std::vector<float> g = to_vector<float>(a.grad());
  CHECK(g[0] == -1.0f);
  CHECK(g[1] == -0.5f);
  CHECK(g[2] == 0.0f);
  CHECK(g[3] == 0.25f);
  CHECK(g[4] == 1.0f);
  CHECK(std::isnan(g[5]));
  CHECK(!none.grad().defined());
}

TEST_CASE("clipping rejects bad thresholds and mismatched gradients", "[optim][clip]") {
  Var a = with_grad(tensor({1, 2}, {2}));
  CHECK_THROWS_AS(clip_grad_norm(std::vector<Var>{a}, 0.0), Error);
  CHECK_THROWS_AS(clip_grad_value(std::vector<Var>{a}, -1.0), Error);
  a.grad() = ones({3});
  CHECK_THROWS_WITH(clip_grad_norm(std::vector<Var>{a}, 1.0), Catch::Matchers::Contains("(3)"));
}
