// Reductions over any set of dims (keepdim or not) and softmax along any dim, on every layout,
// against float64 references computed element by element.
#include <cmath>
#include <limits>

#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

constexpr DType kFloats[] = {DType::f32, DType::f64};

// The output shape and, for each output index, the list of input indices reduced into it.
struct RefPlan {
  Shape out_shape;
  std::vector<bool> reduced;
};

RefPlan ref_plan(const Shape& s, const Shape& dims, bool keepdim) {
  RefPlan p;
  p.reduced.assign(s.size(), dims.empty());
  for (int64_t d : dims) p.reduced[d < 0 ? d + s.size() : d] = true;
  for (size_t d = 0; d < s.size(); ++d)
    if (!p.reduced[d])
      p.out_shape.push_back(s[d]);
    else if (keepdim)
      p.out_shape.push_back(1);
  return p;
}

// ref[out] = f(values reduced into out, in row-major order).
Tensor ref_reduce(const Tensor& x, const Shape& dims, bool keepdim,
                  const std::function<double(const std::vector<double>&)>& f) {
  const RefPlan p = ref_plan(x.shape(), dims, keepdim);
  Shape kept_shape;
  for (size_t d = 0; d < p.reduced.size(); ++d)
    kept_shape.push_back(p.reduced[d] ? 1 : x.shape()[d]);
  Shape red_shape;
  for (size_t d = 0; d < p.reduced.size(); ++d)
    red_shape.push_back(p.reduced[d] ? x.shape()[d] : 1);
  const Tensor kept = build(kept_shape, [&](const Shape& k) {
    std::vector<double> vals;
    for_each_index(red_shape, [&](const Shape& r) {
      Shape i(k.size());
      for (size_t d = 0; d < i.size(); ++d) i[d] = p.reduced[d] ? r[d] : k[d];
      vals.push_back(x.at(i));
    });
    return f(vals);
  });
  return kept.reshape(p.out_shape);
}

double ref_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double ref_mean(const std::vector<double>& v) { return ref_sum(v) / v.size(); }
double ref_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double ref_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double ref_var(const std::vector<double>& v) {
  const double m = ref_mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / (v.size() - 1);
}

const std::vector<Shape> kDimSets = {{},     {0},    {1},    {2},    {-1},
                                     {0, 2}, {2, 0}, {0, 1}, {1, 2}, {0, 1, 2}};

}  // namespace

TEST_CASE("sum, mean, max, min, var over any set of dims, every layout, keepdim") {
  for (DType dt : kFloats) {
    const Tensor x = randn_t({3, 4, 5}, 21, dt);
    for (const Shape& dims : kDimSets)
      for (bool keepdim : {false, true}) {
        const Tensor ws = ref_reduce(x, dims, keepdim, ref_sum);
        const Tensor wm = ref_reduce(x, dims, keepdim, ref_mean);
        const Tensor wx = ref_reduce(x, dims, keepdim, ref_max);
        const Tensor wn = ref_reduce(x, dims, keepdim, ref_min);
        const Tensor wv = ref_reduce(x, dims, keepdim, ref_var);
        for (Layout l : kLayouts) {
          INFO(dtype_name(dt) << " dims " << shape_str(dims) << " keepdim " << keepdim << " "
                              << layout_name(l));
          const Tensor xl = with_layout(x, l);
          const double r = dt == DType::f32 ? 1e-6 : 1e-13;
          const Tensor s = sum(xl, dims, keepdim);
          CHECK(s.dtype() == dt);
          CHECK(close_ref(s, ws, r, r));
          CHECK(close_ref(mean(xl, dims, keepdim), wm, r, r));
          CHECK(close_ref(max(xl, dims, keepdim), wx, 0, 0));
          CHECK(close_ref(min(xl, dims, keepdim), wn, 0, 0));
          CHECK(close_ref(var(xl, dims, 1, keepdim), wv, 10 * r, r));
        }
      }
  }
}

TEST_CASE("reductions of expanded (stride 0) inputs count every broadcast copy") {
  const Tensor row = randn_t({1, 5}, 22, DType::f64);
  const Tensor e = row.expand({4, 5});
  CHECK(max_abs_diff(sum(e, {0}), mul(row.squeeze(0), 4.0)) < 1e-12);
  CHECK(max_abs_diff(mean(e, {0}, true), row) < 1e-15);
  CHECK(std::abs(sum(e).item() - 4 * sum(row).item()) < 1e-12);
  CHECK(max_abs_diff(var(e, {0}), zeros({5}, DType::f64)) == 0);
}

TEST_CASE("var with correction 0 and 1 and a full reduction") {
  const Tensor x = tensor({1, 2, 3, 4}, {2, 2}, DType::f64);
  CHECK(var(x).item() == Approx(5.0 / 3.0));
  CHECK(var(x, {}, 0).item() == Approx(1.25));
  CHECK(to_vector<double>(var(x, {1}, 0)) == std::vector<double>{0.25, 0.25});
  CHECK(var(x, {0}, 1, true).shape() == Shape{1, 2});
}

TEST_CASE("integer and bool reductions") {
  const Tensor i = arange(6).view({2, 3});
  CHECK(sum(i).dtype() == DType::i64);
  CHECK(sum(i).item() == 15);
  CHECK(to_vector<int64_t>(max(i, {0})) == std::vector<int64_t>{3, 4, 5});
  const Tensor m = gt(i, 1.0);
  CHECK(sum(m).dtype() == DType::i64);
  CHECK(sum(m).item() == 4);
  CHECK(to_vector<int64_t>(sum(m, {1})) == std::vector<int64_t>{1, 3});
}

TEST_CASE("argmax along each dim, ties go to the first, every layout") {
  for (DType dt : kFloats) {
    // rounded to few values so ties are common
    Generator gen(23);
    const Tensor x = randint({4, 5, 6}, 0, 4, gen).to(dt);
    for (int64_t d = -3; d < 3; ++d)
      for (bool keepdim : {false, true})
        for (Layout l : kLayouts) {
          INFO(dtype_name(dt) << " dim " << d << " keepdim " << keepdim << " " << layout_name(l));
          const Tensor a = argmax(with_layout(x, l), d, keepdim);
          CHECK(a.dtype() == DType::i64);
          const Tensor want = ref_reduce(x, {d}, keepdim, [](const std::vector<double>& v) {
            return double(std::max_element(v.begin(), v.end()) - v.begin());
          });
          CHECK(close_ref(a, want, 0, 0));
        }
  }
  // a long lane (the full-reduction path) also picks the first maximum
  Tensor big = zeros({300000}, DType::f32);
  big.narrow(0, 123457, 1).fill_(5);
  big.narrow(0, 250000, 1).fill_(5);
  CHECK(argmax(big, 0).item() == 123457);
  CHECK(argmax(big.view({1, 300000}), 1).item() == 123457);
}

TEST_CASE("max and min propagate NaN, and sums of large tensors use a float64 accumulator") {
  const Tensor x = tensor({1, std::nan(""), 3}, {3});
  CHECK(std::isnan(max(x).item()));
  CHECK(std::isnan(min(x).item()));
  // 2^24 + many ones: a float accumulator would stop at 2^24.
  Tensor ones_big = ones({1 << 20}, DType::f32);
  const Tensor big = concat({full({1}, 16777216.0), ones_big}, 0);
  CHECK(sum(big).item() == 16777216.0 + (1 << 20));
  CHECK(mean(ones_big).item() == 1.0);
}

TEST_CASE("reductions of 0-d and empty tensors") {
  const Tensor s = scalar(4.5, DType::f64);
  CHECK(sum(s).item() == 4.5);
  CHECK(sum(s).dim() == 0);
  CHECK(max(s).item() == 4.5);
  CHECK(sum(s, {0}).item() == 4.5);
  const Tensor e = zeros({0, 3});
  CHECK(to_vector<float>(sum(e, {0})) == std::vector<float>{0, 0, 0});
  CHECK(sum(e, {1}).shape() == Shape{0});
  CHECK_THROWS_AS(max(e, {0}), Error);
}

TEST_CASE("sum_to undoes broadcasting") {
  const Tensor g = randn_t({2, 3, 4}, 24, DType::f64);
  const Tensor a = sum_to(g, {3, 1});
  CHECK(a.shape() == Shape{3, 1});
  CHECK(close_ref(a, ref_reduce(g, {0, 2}, false, ref_sum).reshape({3, 1}), 1e-14, 1e-14));
  CHECK(close_ref(sum_to(g, {4}), ref_reduce(g, {0, 1}, false, ref_sum), 1e-14, 1e-14));
  CHECK(sum_to(g, {}).dim() == 0);
  CHECK(sum_to(g, {2, 3, 4}).storage() == g.storage());
}

// ---------------------------------------------------------------- softmax

TEST_CASE("softmax and log_softmax along any dim, every layout, rows sum to 1") {
  for (DType dt : kFloats) {
    const Tensor x = mul(randn_t({3, 4, 5}, 25, dt), 3.0);
    for (int64_t d = -3; d < 3; ++d) {
      const int64_t dd = d < 0 ? d + 3 : d;
      // reference: exp(x - max) / sum, in float64
      const Tensor ref = build(x.shape(), [&](const Shape& i) {
        Shape j = i;
        double m = -INFINITY, z = 0;
        for (j[dd] = 0; j[dd] < x.size(dd); ++j[dd]) m = std::max(m, x.at(j));
        for (j[dd] = 0; j[dd] < x.size(dd); ++j[dd]) z += std::exp(x.at(j) - m);
        return std::exp(x.at(i) - m) / z;
      });
      for (Layout l : kLayouts) {
        INFO(dtype_name(dt) << " dim " << d << " " << layout_name(l));
        const Tensor xl = with_layout(x, l);
        const Tensor y = softmax(xl, d);
        CHECK(close_ref(y, ref, 1e-5 * (dt == DType::f32) + 1e-13, 1e-7));
        const Tensor ls = log_softmax(xl, d);
        CHECK(close_ref(exp(ls), ref, 1e-5 * (dt == DType::f32) + 1e-13, 1e-7));
        CHECK(max_abs_diff(sum(y, {d}), ones(sum(y, {d}).shape(), dt)) < 1e-5);
      }
    }
  }
}

TEST_CASE("softmax: -inf rows give zeros, huge logits stay finite") {
  for (DType dt : kFloats) {
    const double inf = std::numeric_limits<double>::infinity();
    const Tensor x = tensor({-inf, -inf, -inf, 1e4, 1e4 - 1, -1e4, 0, -inf, 2}, {3, 3}, dt);
    const Tensor y = softmax(x, -1);
    CHECK(all_finite(y));
    CHECK(to_vector<double>(y.select(0, 0).to(DType::f64)) == std::vector<double>{0, 0, 0});
    CHECK(y.at({1, 0}) == Approx(1 / (1 + std::exp(-1.0))));
    CHECK(y.at({1, 2}) == 0);
    CHECK(y.at({2, 1}) == 0);
    CHECK(sum(y.select(0, 1)).item() == Approx(1));
    CHECK(sum(y.select(0, 2)).item() == Approx(1));
    // along dim 0 (non-last): column 0 has a finite 1e4 and a 0 and a -inf
    const Tensor y0 = softmax(x, 0);
    CHECK(all_finite(y0));
    CHECK(y0.at({1, 0}) == 1);
    // masked attention row: all -inf in a non-last dim lane
    const Tensor ls = log_softmax(x, -1);
    CHECK(std::isinf(ls.at({0, 0})));
    CHECK(ls.at({1, 0}) == Approx(-std::log1p(std::exp(-1.0))));
    CHECK(std::isfinite(ls.at({1, 2})));
    // logits of 1e4 everywhere: uniform
    const Tensor u = softmax(full({2, 4}, 1e4, dt), 1);
    CHECK(max_abs_diff(u, full({2, 4}, 0.25, dt)) < 1e-7);
  }
}

TEST_CASE("softmax_backward and log_softmax_backward match finite differences") {
  const Tensor x = randn_t({3, 5}, 26, DType::f64);
  const Tensor g = randn_t({3, 5}, 27, DType::f64);
  for (int64_t d : {0, 1}) {
    INFO("dim " << d);
    // L = sum(g * softmax(x)); dL/dx by central differences
    auto loss = [&](const Tensor& xx, bool lg) {
      return sum(mul(g, lg ? log_softmax(xx, d) : softmax(xx, d))).item();
    };
    for (bool lg : {false, true}) {
      const Tensor y = lg ? log_softmax(x, d) : softmax(x, d);
      const Tensor dx = lg ? log_softmax_backward(y, g, d) : softmax_backward(y, g, d);
      const Tensor fd = build(x.shape(), [&](const Shape& i) {
        Tensor xp = x.clone(), xm = x.clone();
        const double h = 1e-6;
        xp.select(0, i[0]).narrow(0, i[1], 1).fill_(x.at(i) + h);
        xm.select(0, i[0]).narrow(0, i[1], 1).fill_(x.at(i) - h);
        return (loss(xp, lg) - loss(xm, lg)) / (2 * h);
      });
      CHECK(max_abs_diff(dx, fd) < 1e-8);
      // transposed operands give the same gradient
      const Tensor dxt = lg ? log_softmax_backward(y.t().contiguous().t(), g, d)
                            : softmax_backward(y, g.t().contiguous().t(), d);
      CHECK(max_abs_diff(dxt, dx) < 1e-15);
    }
  }
}
