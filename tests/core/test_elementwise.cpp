// Elementwise ops on every layout (contiguous, transposed, sliced with step, offset narrow,
// expanded) and broadcasting corner cases, float32 and float64, against float64 references
// computed one element at a time through Tensor::at.
#include <cmath>
#include <limits>

#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

constexpr DType kFloats[] = {DType::f32, DType::f64};

using BinOp = Tensor (*)(const Tensor&, const Tensor&);
struct Binary {
  const char* name;
  BinOp op;
  double (*ref)(double, double);
};

const Binary kBinary[] = {
    {"add", static_cast<BinOp>(add), [](double x, double y) { return x + y; }},
    {"sub", static_cast<BinOp>(sub), [](double x, double y) { return x - y; }},
    {"mul", static_cast<BinOp>(mul), [](double x, double y) { return x * y; }},
    {"div", static_cast<BinOp>(div), [](double x, double y) { return x / y; }},
    {"pow", static_cast<BinOp>(pow), [](double x, double y) { return std::pow(x, y); }},
    {"maximum", static_cast<BinOp>(maximum), [](double x, double y) { return std::max(x, y); }},
    {"minimum", static_cast<BinOp>(minimum), [](double x, double y) { return std::min(x, y); }},
};

// Reference for a broadcasting binary op, from the inputs' own (rounded) values.
Tensor ref_binary(const Tensor& a, const Tensor& b, double (*f)(double, double)) {
  const Shape s = broadcast_shapes(a.shape(), b.shape(), "ref");
  return build(s, [&](const Shape& i) { return f(at_bcast(a, i), at_bcast(b, i)); });
}

// Positive inputs for pow and div, any sign otherwise.
Tensor operand(const Shape& s, uint64_t seed, DType dt, bool positive) {
  Tensor x = randn_t(s, seed, dt);
  return positive ? add(abs(x), 0.5) : x;
}

}  // namespace

TEST_CASE("binary ops on every layout and dtype match the float64 reference") {
  for (DType dt : kFloats) {
    for (const Binary& op : kBinary) {
      const bool positive = std::string(op.name) == "pow" || std::string(op.name) == "div";
      const Tensor a = operand({3, 4, 5}, 1, dt, positive);
      const Tensor b = operand({3, 4, 5}, 2, dt, positive);
      const Tensor want = ref_binary(a, b, op.ref);
      for (Layout la : kLayouts)
        for (Layout lb : kLayouts) {
          INFO(op.name << " " << dtype_name(dt) << " a " << layout_name(la) << ", b "
                       << layout_name(lb));
          const Tensor got = op.op(with_layout(a, la), with_layout(b, lb));
          CHECK(got.dtype() == dt);
          CHECK(got.is_contiguous());
          CHECK(close_ref(got, want, rtol_for(dt), 0));
        }
    }
  }
}

TEST_CASE("broadcasting corner cases") {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{3, 1}, {1, 4}, {3, 4}},           // both sides broadcast
      {{2, 3, 4}, {4}, {2, 3, 4}},        // rank extension
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},     // middle and trailing
      {{}, {2, 3}, {2, 3}},               // 0-d against a matrix
      {{5}, {}, {5}},                     // matrix against 0-d
      {{1}, {2, 1, 3}, {2, 1, 3}},        // size-1 1-d
      {{0, 3}, {1, 3}, {0, 3}},           // empty dim
      {{1, 1, 1}, {1, 1}, {1, 1, 1}},     // all ones
      {{4, 1, 2}, {4, 3, 1}, {4, 3, 2}},  // interleaved
  };
  for (DType dt : kFloats)
    for (const Case& c : cases) {
      INFO(shape_str(c.a) << " and " << shape_str(c.b) << " " << dtype_name(dt));
      const Tensor a = randn_t(c.a, 3, dt), b = randn_t(c.b, 4, dt);
      CHECK(broadcast_shapes(c.a, c.b, "test") == c.out);
      for (const Binary& op : {kBinary[0], kBinary[2], kBinary[5]}) {
        const Tensor got = op.op(a, b);
        CHECK(got.shape() == c.out);
        CHECK(close_ref(got, ref_binary(a, b, op.ref), rtol_for(dt), 0));
        // transposed operands broadcast the same way
        if (a.dim() >= 2)
          CHECK(close_ref(op.op(with_layout(a, Layout::transposed), b), ref_binary(a, b, op.ref),
                          rtol_for(dt), 0));
      }
    }
}

TEST_CASE("explicitly expanded (stride 0) operands") {
  for (DType dt : kFloats) {
    const Tensor row = randn_t({1, 6}, 5, dt);
    const Tensor col = randn_t({4, 1}, 6, dt).slice(0, 0, 4, 1);
    const Tensor e1 = row.expand({4, 6}), e2 = col.expand({4, 6});
    const Tensor got = sub(e1, e2);
    CHECK(close_ref(got, ref_binary(row, col, kBinary[1].ref), rtol_for(dt), 0));
    // an expanded operand against a stepped one
    const Tensor m = with_layout(randn_t({4, 6}, 7, dt), Layout::stepped);
    CHECK(close_ref(mul(e1, m), ref_binary(row, m, kBinary[2].ref), rtol_for(dt), 0));
    CHECK(close_ref(exp(e2),
                    build({4, 6},
                          [&](const Shape& i) {
                            return std::exp(col.at({i[0], 0}));
                          }),
                    rtol_for(dt), 0));
  }
}

TEST_CASE("operators and scalar variants") {
  for (DType dt : kFloats) {
    const Tensor x = with_layout(add(abs(randn_t({3, 5}, 8, dt)), 0.25), Layout::transposed);
    auto un = [&](double (*f)(double)) {
      return build(x.shape(), [&](const Shape& i) { return f(x.at(i)); });
    };
    const double r = rtol_for(dt);
    CHECK(close_ref(x + 2.5, un([](double v) { return v + 2.5; }), r, 0));
    CHECK(close_ref(2.5 + x, un([](double v) { return v + 2.5; }), r, 0));
    CHECK(close_ref(x - 1.5, un([](double v) { return v - 1.5; }), r, 1e-6));
    CHECK(close_ref(1.5 - x, un([](double v) { return 1.5 - v; }), r, 1e-6));
    CHECK(close_ref(x * 3.0, un([](double v) { return v * 3; }), r, 0));
    CHECK(close_ref(3.0 * x, un([](double v) { return v * 3; }), r, 0));
    CHECK(close_ref(x / 4.0, un([](double v) { return v / 4; }), r, 0));
    CHECK(close_ref(4.0 / x, un([](double v) { return 4 / v; }), r, 0));
    CHECK(close_ref(pow(x, 2.0), un([](double v) { return v * v; }), r, 0));
    CHECK(close_ref(pow(x, 0.5), un([](double v) { return std::sqrt(v); }), r, 0));
    CHECK(close_ref(pow(x, -1.5), un([](double v) { return std::pow(v, -1.5); }), r, 0));
    CHECK(close_ref(maximum(x, 1.0), un([](double v) { return std::max(v, 1.0); }), 0, 0));
    CHECK(close_ref(minimum(x, 1.0), un([](double v) { return std::min(v, 1.0); }), 0, 0));
    CHECK(close_ref(-x, un([](double v) { return -v; }), 0, 0));
    const Tensor y = with_layout(randn_t({3, 5}, 9, dt), Layout::stepped);
    CHECK(close_ref(x + y, ref_binary(x, y, kBinary[0].ref), r, 0));
    CHECK(close_ref(x - y, ref_binary(x, y, kBinary[1].ref), r, 0));
    CHECK(close_ref(x * y, ref_binary(x, y, kBinary[2].ref), r, 0));
    CHECK(close_ref(y / x, ref_binary(y, x, kBinary[3].ref), r, 0));
  }
  // int64 arithmetic stays int64
  const Tensor i = arange(5);
  CHECK(to_vector<int64_t>(i * 3.0) == std::vector<int64_t>{0, 3, 6, 9, 12});
  CHECK(to_vector<int64_t>(add(i, i)) == std::vector<int64_t>{0, 2, 4, 6, 8});
  CHECK(to_vector<int64_t>(abs(sub(i, 2.0))) == std::vector<int64_t>{2, 1, 0, 1, 2});
}

TEST_CASE("unary ops on every layout and dtype") {
  struct Unary {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*ref)(double);
    bool positive;
  };
  const Unary ops[] = {
      {"neg", neg, [](double v) { return -v; }, false},
      {"exp", exp, [](double v) { return std::exp(v); }, false},
      {"log", log, [](double v) { return std::log(v); }, true},
      {"sqrt", sqrt, [](double v) { return std::sqrt(v); }, true},
      {"rsqrt", rsqrt, [](double v) { return 1 / std::sqrt(v); }, true},
      {"tanh", tanh, [](double v) { return std::tanh(v); }, false},
      {"sigmoid", sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, false},
      {"relu", relu, [](double v) { return v > 0 ? v : 0.0; }, false},
      {"gelu", gelu, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, false},
      {"abs", abs, [](double v) { return std::abs(v); }, false},
      {"sign", sign, [](double v) { return double((v > 0) - (v < 0)); }, false},
  };
  for (DType dt : kFloats)
    for (const Unary& u : ops) {
      Tensor x = mul(randn_t({4, 3, 6}, 11, dt), 2.0);
      if (u.positive) x = add(abs(x), 0.1);
      const Tensor want = build(x.shape(), [&](const Shape& i) { return u.ref(x.at(i)); });
      for (Layout l : kLayouts) {
        INFO(u.name << " " << dtype_name(dt) << " " << layout_name(l));
        const Tensor got = u.op(with_layout(x, l));
        CHECK(got.dtype() == dt);
        CHECK(close_ref(got, want, 4 * rtol_for(dt), dt == DType::f32 ? 1e-7 : 1e-15));
      }
      INFO(u.name << " expanded");
      const Tensor e = x.narrow(0, 0, 1).expand({5, 3, 6});
      CHECK(close_ref(u.op(e), build(e.shape(), [&](const Shape& i) { return u.ref(e.at(i)); }),
                      4 * rtol_for(dt), dt == DType::f32 ? 1e-7 : 1e-15));
    }
}

TEST_CASE("unary ops at extreme values stay finite where they should") {
  for (DType dt : kFloats) {
    const Tensor x = tensor({-1000, -80, 0, 80, 1000}, {5}, dt);
    const Tensor s = sigmoid(x);
    CHECK(all_finite(s));
    CHECK(s.at({0}) == 0);
    CHECK(s.at({2}) == 0.5);
    CHECK(s.at({4}) == 1);
    CHECK(all_finite(tanh(x)));
    CHECK(all_finite(gelu(x)));
    CHECK(gelu(x).at({0}) == 0);
    CHECK(gelu(x).at({4}) == 1000);
    CHECK(log(tensor({0}, {1}, dt)).item() == -std::numeric_limits<double>::infinity());
    CHECK(std::isnan(sqrt(tensor({-1}, {1}, dt)).item()));
    CHECK_FALSE(all_finite(exp(x)));
    CHECK(to_vector<uint8_t>(isfinite(exp(x))) == std::vector<uint8_t>{1, 1, 1, 1, 0});
  }
}

TEST_CASE("gelu_grad matches a central difference of gelu") {
  const Tensor x = mul(randn_t({50}, 12, DType::f64), 3.0);
  const double h = 1e-5;
  const Tensor fd = div(sub(gelu(add(x, h)), gelu(sub(x, h))), 2 * h);
  CHECK(max_abs_diff(gelu_grad(x), fd) < 1e-8);
}

TEST_CASE("comparisons give bool masks on every layout, tensor and scalar forms") {
  using CmpOp = Tensor (*)(const Tensor&, const Tensor&);
  using CmpS = Tensor (*)(const Tensor&, double);
  struct Cmp {
    const char* name;
    CmpOp op;
    CmpS ops;
    bool (*ref)(double, double);
  };
  const Cmp cmps[] = {
      {"eq", eq, eq, [](double x, double y) { return x == y; }},
      {"ne", ne, ne, [](double x, double y) { return x != y; }},
      {"lt", lt, lt, [](double x, double y) { return x < y; }},
      {"le", le, le, [](double x, double y) { return x <= y; }},
      {"gt", gt, gt, [](double x, double y) { return x > y; }},
      {"ge", ge, ge, [](double x, double y) { return x >= y; }},
  };
  for (DType dt : kFloats) {
    // small integers so ties happen
    const Tensor a = tensor({0, 1, 2, 2, 1, 0, 3, 1, 2, 0, 0, 1}, {3, 4}, dt);
    const Tensor b = tensor({1, 1, 0, 2}, {4}, dt);
    for (const Cmp& c : cmps)
      for (Layout l : kLayouts) {
        INFO(c.name << " " << dtype_name(dt) << " " << layout_name(l));
        const Tensor m = c.op(with_layout(a, l), b);
        CHECK(m.dtype() == DType::b8);
        CHECK(m.shape() == Shape{3, 4});
        for_each_index(m.shape(),
                       [&](const Shape& i) { CHECK(m.at(i) == c.ref(a.at(i), b.at({i[1]}))); });
        const Tensor ms = c.ops(with_layout(a, l), 1.0);
        for_each_index(ms.shape(), [&](const Shape& i) { CHECK(ms.at(i) == c.ref(a.at(i), 1.0)); });
      }
  }
  // An int64 tensor against a fractional scalar compares the true values.
  const Tensor i = arange(3);
  CHECK(to_vector<uint8_t>(lt(i, 0.5)) == std::vector<uint8_t>{1, 0, 0});
  CHECK(to_vector<uint8_t>(gt(i, 1.5)) == std::vector<uint8_t>{0, 0, 1});
  CHECK(to_vector<uint8_t>(eq(i, 1.0)) == std::vector<uint8_t>{0, 1, 0});
  CHECK(to_vector<uint8_t>(eq(i, 1.5)) == std::vector<uint8_t>{0, 0, 0});
  // masks combine
  const Tensor m1 = gt(i, 0.0), m2 = lt(i, 2.0);
  CHECK(to_vector<uint8_t>(logical_and(m1, m2)) == std::vector<uint8_t>{0, 1, 0});
  CHECK(to_vector<uint8_t>(logical_or(m1, m2)) == std::vector<uint8_t>{1, 1, 1});
  CHECK(to_vector<uint8_t>(logical_not(m1)) == std::vector<uint8_t>{1, 0, 0});
}

TEST_CASE("where and masked_fill broadcast over every layout") {
  for (DType dt : kFloats) {
    const Tensor x = randn_t({4, 5}, 13, dt), y = randn_t({5}, 14, dt);
    const Tensor cond = gt(randn_t({4, 1}, 15, DType::f64), 0.0);
    for (Layout l : kLayouts) {
      INFO(dtype_name(dt) << " " << layout_name(l));
      const Tensor xl = with_layout(x, l);
      const Tensor w = where(cond, xl, y);
      CHECK(w.shape() == Shape{4, 5});
      for_each_index(w.shape(), [&](const Shape& i) {
        CHECK(w.at(i) == (cond.at({i[0], 0}) ? x.at(i) : y.at({i[1]})));
      });
      const Tensor mask = gt(xl, 0.0);
      const Tensor f = masked_fill(xl, mask, -1e9);
      for_each_index(f.shape(), [&](const Shape& i) {
        CHECK(f.at(i) ==
              (x.at(i) > 0 ? static_cast<double>(dt == DType::f32 ? float(-1e9) : -1e9) : x.at(i)));
      });
      // a broadcast mask (a causal-style row mask)
      const Tensor rowmask = tensor({1, 0, 0, 1, 0}, {5}).to(DType::b8);
      const Tensor g = masked_fill(xl, rowmask, -std::numeric_limits<double>::infinity());
      for_each_index(g.shape(), [&](const Shape& i) {
        if (rowmask.at({i[1]}))
          CHECK(std::isinf(g.at(i)));
        else
          CHECK(g.at(i) == x.at(i));
      });
    }
    // where with a scalar-shaped branch
    const Tensor z = where(cond, scalar(0, dt), x);
    CHECK(z.at({0, 0}) == (cond.at({0, 0}) ? 0.0 : x.at({0, 0})));
  }
}

TEST_CASE("NaN propagates through maximum, minimum and relu") {
  for (DType dt : kFloats) {
    const Tensor x = tensor({std::nan(""), 1, -2}, {3}, dt);
    const Tensor y = tensor({0, std::nan(""), -3}, {3}, dt);
    const Tensor mx = maximum(x, y), mn = minimum(x, y);
    CHECK(std::isnan(mx.at({0})));
    CHECK(std::isnan(mx.at({1})));
    CHECK(mx.at({2}) == -2);
    CHECK(std::isnan(mn.at({0})));
    CHECK(mn.at({2}) == -3);
    CHECK(std::isnan(maximum(x, 0.0).at({0})));
    CHECK(maximum(x, 0.0).at({2}) == 0);
    CHECK(std::isnan(relu(x).at({0})));
    CHECK(relu(x).at({2}) == 0);
  }
}

TEST_CASE("gelu keeps its relative accuracy in the negative tail (float32)") {
  // 0.5 x (1 + erf(x / sqrt 2)) cancels for x << 0; the erfc form does not.
  const Tensor x = tensor({-3, -4, -5, -6, -7, -8}, {6}, DType::f32);
  const Tensor g = gelu(x), gg = gelu_grad(x);
  for (int64_t i = 0; i < 6; ++i) {
    const double v = x.at({i});
    const double want = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    INFO("x = " << v);
    CHECK(g.at({i}) == Approx(want).epsilon(1e-5));
    const double want_grad =
        0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    CHECK(gg.at({i}) == Approx(want_grad).epsilon(1e-4).margin(1e-30));
  }
}
