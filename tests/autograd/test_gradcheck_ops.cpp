// Every differentiable op against central differences in float64, on contiguous,
// non-contiguous (transposed, sliced with step) and broadcast inputs.
#include <catch2/catch.hpp>

#include "autograd/gradcheck.hpp"
#include "autograd/ops.hpp"

using namespace qkv;
using namespace qkv::ag;

namespace {

Generator gen(1234);

Var leaf(const Shape& s, double lo = -1, double hi = 1) {
  return Var(uniform(s, lo, hi, gen, DType::f64), true);
}
// A (r, c) leaf whose data is a transposed view of a (c, r) tensor: non-contiguous.
Var leaf_t(int64_t r, int64_t c) { return Var(uniform({c, r}, -1, 1, gen, DType::f64).t(), true); }
// A (r, c) leaf sliced with step 2 out of a (2r, c) tensor.
Var leaf_step(int64_t r, int64_t c) {
  return Var(uniform({2 * r, c}, -1, 1, gen, DType::f64).slice(0, 0, 2 * r, 2), true);
}

void check(const GradcheckFn& f, const std::vector<Var>& in) {
  const GradcheckReport r = gradcheck(f, in);
  INFO(r.summary());
  CHECK(r.passed);
}

using Ins = const std::vector<Var>&;

}  // namespace

TEST_CASE("gradcheck: binary elementwise ops, plain, non-contiguous and broadcast") {
  const std::vector<std::pair<const char*, std::function<Var(const Var&, const Var&)>>> ops = {
      {"add", [](const Var& a, const Var& b) { return add(a, b); }},
      {"sub", [](const Var& a, const Var& b) { return sub(a, b); }},
      {"mul", [](const Var& a, const Var& b) { return mul(a, b); }},
      {"div", [](const Var& a, const Var& b) { return div(a, b); }},
      {"maximum", [](const Var& a, const Var& b) { return maximum(a, b); }},
  };
  for (const auto& [name, op] : ops) {
    INFO(name);
    auto f = [op = op](Ins in) { return op(in[0], in[1]); };
    auto denom = [](const Shape& s) { return Var(uniform(s, 0.5, 2.0, gen, DType::f64), true); };
    check(f, {leaf({3, 4}), denom({3, 4})});
    check(f, {leaf_t(3, 4), leaf_step(3, 4)});
    check(f, {leaf({3, 1}), denom({1, 4})});  // both broadcast
    check(f, {leaf({2, 3, 4}), denom({4})});  // leading dims broadcast
    check(f, {leaf({}), denom({2, 3})});      // scalar
  }
}

TEST_CASE("gradcheck: scalar and unary ops") {
  const std::vector<std::pair<const char*, std::function<Var(const Var&)>>> ops = {
      {"add_scalar", [](const Var& a) { return add(a, 0.7); }},
      {"mul_scalar", [](const Var& a) { return mul(a, -1.3); }},
      {"rsub", [](const Var& a) { return rsub(2.0, a); }},
      {"neg", [](const Var& a) { return neg(a); }},
      {"pow", [](const Var& a) { return pow(a, 3.0); }},
      {"exp", [](const Var& a) { return exp(a); }},
      {"tanh", [](const Var& a) { return tanh(a); }},
      {"sigmoid", [](const Var& a) { return sigmoid(a); }},
      {"relu", [](const Var& a) { return relu(a); }},
      {"gelu", [](const Var& a) { return gelu(a); }},
      {"elu", [](const Var& a) { return elu(a); }},
      {"abs", [](const Var& a) { return abs(a); }},
  };
  for (const auto& [name, op] : ops) {
    INFO(name);
    auto f = [op = op](Ins in) { return op(in[0]); };
    check(f, {leaf({3, 5})});
    check(f, {leaf_t(4, 3)});
  }
  // Ops defined for positive inputs only.
  check([](Ins in) { return log(in[0]); }, {leaf({3, 4}, 0.5, 2)});
  check([](Ins in) { return sqrt(in[0]); }, {leaf({3, 4}, 0.5, 2)});
  check([](Ins in) { return rsqrt(in[0]); }, {leaf({3, 4}, 0.5, 2)});
  check([](Ins in) { return pow(in[0], 0.5); }, {leaf({4}, 0.5, 2)});
}

TEST_CASE("gradcheck: where and masked_fill send no gradient through the masked part") {
  const Tensor cond = gt(uniform({3, 4}, -1, 1, gen, DType::f64), 0.0);
  check([&](Ins in) { return where(cond, in[0], in[1]); }, {leaf({3, 4}), leaf({1, 4})});
  check([&](Ins in) { return masked_fill(in[0], cond, -3.0); }, {leaf_t(3, 4)});
  const Var x = leaf({3, 4});
  masked_fill(x, cond, 0.0).backward(ones({3, 4}, DType::f64));
  CHECK(allclose(x.grad(), where(cond, zeros({}, DType::f64), ones({}, DType::f64))));
}

TEST_CASE("gradcheck: softmax and log_softmax along every dim") {
  for (int64_t d : {0, 1, 2, -1}) {
    INFO("dim " << d);
    check([d](Ins in) { return softmax(in[0], d); }, {leaf({2, 3, 4}, -3, 3)});
    check([d](Ins in) { return log_softmax(in[0], d); }, {leaf({2, 3, 4}, -3, 3)});
  }
  check([](Ins in) { return softmax(in[0], -1); }, {leaf_t(3, 5)});
}

TEST_CASE("softmax of a fully masked row: zeros forward, zero and finite gradient") {
  Tensor x = uniform({2, 4}, -1, 1, gen, DType::f64);
  x.select(0, 1).fill_(-INFINITY);
  const Var v(x, true);
  const Var y = softmax(v, -1);
  CHECK(qkv::sum(y.data().select(0, 1)).item() == 0.0);
  y.backward(uniform({2, 4}, -1, 1, gen, DType::f64));
  CHECK(all_finite(v.grad()));
  CHECK(qkv::sum(qkv::abs(v.grad().select(0, 1))).item() == 0.0);
}

TEST_CASE("gradcheck: reductions") {
  check([](Ins in) { return sum(in[0]); }, {leaf({3, 4})});
  check([](Ins in) { return sum(in[0], {0, 2}, true); }, {leaf({2, 3, 4})});
  check([](Ins in) { return sum(in[0], {1}); }, {leaf_t(3, 4)});
  check([](Ins in) { return mean(in[0], {-1}); }, {leaf({2, 3, 4})});
  check([](Ins in) { return mean(in[0]); }, {leaf_step(3, 4)});
  check([](Ins in) { return max(in[0], {1}); }, {leaf({3, 5})});
  check([](Ins in) { return max(in[0], {0, 2}, true); }, {leaf({2, 3, 4})});
  check([](Ins in) { return max(in[0]); }, {leaf_t(3, 4)});
  check([](Ins in) { return var(in[0], {1}); }, {leaf({3, 5})});
  check([](Ins in) { return var(in[0], {}, 0, false); }, {leaf_t(3, 4)});
}

TEST_CASE("max with ties sends the whole gradient to the first maximum") {
  const Var x(tensor({1, 3, 3, 2, 5, 5}, {2, 3}, DType::f64), true);
  max(x, {1}).backward(ones({2}, DType::f64));
  CHECK(to_vector<double>(x.grad()) == std::vector<double>{0, 1, 0, 0, 1, 0});
}

TEST_CASE("gradcheck: views") {
  check([](Ins in) { return reshape(in[0], {4, 3}); }, {leaf_t(3, 4)});
  check([](Ins in) { return transpose(in[0], 0, 2); }, {leaf({2, 3, 4})});
  check([](Ins in) { return permute(in[0], {2, 0, 1}); }, {leaf({2, 3, 4})});
  check([](Ins in) { return slice(in[0], 1, 1, 5, 2); }, {leaf({3, 6})});
  check([](Ins in) { return narrow(in[0], 0, 1, 2); }, {leaf_t(4, 3)});
  check([](Ins in) { return select(in[0], 1, 2); }, {leaf({2, 3, 4})});
  check([](Ins in) { return expand(in[0], {3, 2, 4}); }, {leaf({2, 1})});
  check([](Ins in) { return unsqueeze(in[0], 1); }, {leaf({2, 3})});
  check([](Ins in) { return squeeze(in[0], 1); }, {leaf({2, 1, 3})});
  check([](Ins in) { return contiguous(in[0]); }, {leaf_t(3, 4)});
  check(
      [](Ins in) {
        return concat({in[0], in[1], in[2]}, 1);
      },
      {leaf({2, 3}), leaf_t(2, 1), leaf({2, 2})});
  check([](Ins in) { return stack({in[0], in[1]}, 0); }, {leaf({2, 3}), leaf_step(2, 3)});
  check(
      [](Ins in) {
        auto parts = split(in[0], {1, 3}, 1);
        return add(mul(parts[0], 2.0), sum(parts[1], {1}, true));
      },
      {leaf({3, 4})});
  check(
      [](Ins in) {
        auto p = chunk(in[0], 2, 0);
        return mul(p[0], p[1]);
      },
      {leaf({4, 3})});
}

TEST_CASE("gradcheck: matmul, batched, broadcast and on transposed views") {
  check([](Ins in) { return matmul(in[0], in[1]); }, {leaf({3, 4}), leaf({4, 5})});
  check([](Ins in) { return matmul(in[0], in[1]); }, {leaf_t(3, 4), leaf_t(4, 2)});
  check([](Ins in) { return matmul(in[0], in[1]); }, {leaf({2, 3, 4}), leaf({4, 5})});
  check([](Ins in) { return matmul(in[0], in[1]); }, {leaf({2, 1, 3, 4}), leaf({3, 4, 2})});
  check([](Ins in) { return matmul(in[0], transpose(in[1], -1, -2)); },
        {leaf({2, 3, 4}), leaf({2, 5, 4})});
  check([](Ins in) { return linear(in[0], in[1], in[2]); },
        {leaf({2, 3, 4}), leaf({5, 4}), leaf({5})});
  check([](Ins in) { return linear(in[0], in[1]); }, {leaf_t(3, 4), leaf({2, 4})});
}

TEST_CASE("gradcheck: indexing with repeated indices") {
  const Tensor idx = from_vector<int64_t>({2, 0, 2, 1, 2}, {5});
  check([&](Ins in) { return index_select(in[0], 0, idx); }, {leaf({3, 4})});
  check([&](Ins in) { return index_select(in[0], 1, idx); }, {leaf_t(2, 3)});
  const Tensor gidx = from_vector<int64_t>({0, 0, 2, 1, 1, 1}, {2, 3});
  check([&](Ins in) { return gather(in[0], 1, gidx); }, {leaf({2, 4})});
  const Tensor ids = from_vector<int64_t>({1, 1, 3, 0, 1, 2}, {2, 3});
  check([&](Ins in) { return embedding(in[0], ids); }, {leaf({4, 5})});
  // repeated indices accumulate: row 2 is used three times
  const Var w = leaf({3, 4});
  index_select(w, 0, idx).backward(ones({5, 4}, DType::f64));
  CHECK(to_vector<double>(w.grad().select(1, 0)) == std::vector<double>{1, 1, 3});
}

TEST_CASE("gradcheck: layer_norm, dropout, losses") {
  check([](Ins in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
        {leaf({2, 3, 5}), leaf({5}), leaf({5})});
  check([](Ins in) { return layer_norm(in[0], Var(), Var(), 1e-5); }, {leaf_t(3, 4)});
  check([](Ins in) { return rms_norm(in[0], in[1], 1e-5); }, {leaf({2, 3, 5}), leaf({5})});
  check([](Ins in) { return rms_norm(in[0], Var(), 1e-6); }, {leaf_t(3, 4)});
  // dropout: the same mask each call (a fresh generator with one seed)
  check(
      [](Ins in) {
        Generator g(7);
        return dropout(in[0], 0.3, g);
      },
      {leaf({4, 5})});
  check(
      [](Ins in) {
        Generator g(8);
        return dropout(in[0], 0.5, g);
      },
      {leaf_t(6, 7)});
  const Tensor targets = from_vector<int64_t>({1, 0, 3, -100, 2}, {5});
  check([&](Ins in) { return cross_entropy(in[0], targets, -100, 0.0); }, {leaf({5, 4}, -2, 2)});
  check([&](Ins in) { return cross_entropy(in[0], targets, -100, 0.1); }, {leaf({5, 4}, -2, 2)});
  const Tensor targets2 = from_vector<int64_t>({1, 0, 3, 2, 2}, {5});
  check([&](Ins in) { return cross_entropy(in[0], targets2, 2, 0.2); }, {leaf_t(5, 4)});
  // every target ignored: loss 0 and zero gradient, not NaN
  const Var z(uniform({2, 4}, -1, 1, gen, DType::f64), true);
  const Var l = cross_entropy(z, from_vector<int64_t>({-100, -100}, {2}));
  CHECK(l.item() == 0.0);
  l.backward();
  CHECK(qkv::sum(qkv::abs(z.grad())).item() == 0.0);
  check([](Ins in) { return mse_loss(in[0], in[1]); }, {leaf({3, 4}), leaf({3, 4})});
}

TEST_CASE("gradcheck: large inputs are checked along random directions") {
  const Var a = leaf({64, 48}), b = leaf({48, 40});
  const GradcheckReport r = gradcheck([](Ins in) { return matmul(in[0], in[1]); }, {a, b});
  INFO(r.summary());
  CHECK(r.passed);
  CHECK(r.inputs[0].directional);
}

TEST_CASE("rms_norm equals its formula, forward and backward, with and without a gain") {
  // x (rms(x)^2 + eps)^-1/2 gamma, composed of plain ops; 300 rows of 130 cross the parallel
  // grain and the 16-lane sums' tail
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
    for (bool with_gain : {true, false}) {
      Generator g(5);
      const Var x(uniform({300, 130}, -3, 3, g, dt), true), x2(x.data().clone(), true);
      const Var gam = with_gain ? Var(uniform({130}, 0.5, 1.5, g, dt), true) : Var();
      const Var gam2 = with_gain ? Var(gam.data().clone(), true) : Var();
      const Tensor dy = uniform({300, 130}, -1, 1, g, dt);
      const Var y = rms_norm(x, gam, 1e-5);
      Var want = mul(x2, rsqrt(add(mean(mul(x2, x2), {-1}, true), 1e-5)));
      if (with_gain) want = mul(want, gam2);
      CHECK(max_abs_diff(y.data(), want.data()) < tol);
      sum(mul(y, Var(dy))).backward();
      sum(mul(want, Var(dy))).backward();
      CHECK(max_abs_diff(x.grad(), x2.grad()) < tol);
      if (with_gain) CHECK(max_abs_diff(gam.grad(), gam2.grad()) < 100 * tol);
    }
  }
  Generator g(1);
  CHECK_THROWS_WITH(rms_norm(Var(zeros({2, 4})), Var(zeros({3})), 1e-6),
                    Catch::Contains("rms_norm"));
  CHECK_THROWS_WITH(rms_norm(Var(zeros({2, 4})), Var(), 0.0), Catch::Contains("eps"));
}
