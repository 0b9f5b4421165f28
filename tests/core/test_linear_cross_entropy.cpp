// The output layer and its cross-entropy in one bf16 op (core/fused.hpp's
// linear_cross_entropy_forward / _backward, core/linear_cross_entropy.cpp) against the float32
// composition linear_forward, cross_entropy_forward and cross_entropy_backward, then the
// linear layer's backward products, outside any PrecisionScope. Sizes cross the 128-row chunks
// (300 rows: two full chunks and a ragged one) with ignored rows at the chunks' edges, with and
// without a bias, label smoothing 0 and 0.1, an upstream gradient of 1 and 0.5:
//   - on float32 inputs, within bfloat16's tolerance (the inputs are rounded to bf16);
//   - on inputs exact in bfloat16, the float32 loss to 1e-5 and the gradients up to the
//     rounding of the logits' gradient to bfloat16 alone, element by element;
//   - the same bits twice and at 1 and 2 threads; every target ignored (0, not NaN); no
//     gradient asked (the same loss bits); bad inputs named in the error.
// The autograd op and Model::forward_loss: tests/nn/test_linear_cross_entropy_model.cpp;
// PyTorch's autocast on the same inputs: tests/nn/test_linear_cross_entropy_reference.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bf16.hpp"
#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "core/storage.hpp"
#include "support/common.hpp"
#include "support/linear_cross_entropy.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

// bfloat16's unit roundoff: rounding to nearest changes a value by at most 2^-8 of itself.
constexpr double kBf16Unit = 1.0 / 256;

// The chunked cases (support/linear_cross_entropy.hpp): 300 rows, d 40, a vocabulary of 1031.
constexpr int64_t kN = kLceRows, kD = kLceDim, kV = kLceVocab;
using Problem = LceProblem;

// The float32 composition, outside any PrecisionScope; dlogits = g / count (softmax - q).
struct Reference {
  double loss = 0;
  int64_t count = 0;
  Tensor dlogits, dx, dw, db;
};
Reference reference(const Problem& p, double g) {
  REQUIRE(current_precision() == Precision::fp32);
  const Tensor logits = linear_forward(p.x, p.w, p.b);
  const CrossEntropyResult f = cross_entropy_forward(logits, p.t, p.ignore, p.eps);
  Reference r;
  r.loss = f.loss;
  r.count = f.count;
  r.dlogits = cross_entropy_backward(f, g);
  r.dx = linear_input_grad(r.dlogits, p.w);
  r.dw = linear_weight_grad(r.dlogits, p.x);
  if (p.b.defined()) r.db = sum_rows(r.dlogits);
  return r;
}

// The fused op, forward and backward in one bf16 scope (dx, dw and, with a bias, db).
struct Fused {
  LinearCrossEntropyResult r;
  LinearCrossEntropyGrads g;
};
Fused fused(const Problem& p, double g, bool with_grad = true) {
  PrecisionScope scope(Precision::bf16);
  Fused o;
  o.r = linear_cross_entropy_forward(p.x, p.w, p.b, p.t, p.ignore, p.eps, with_grad);
  if (with_grad) o.g = linear_cross_entropy_backward(o.r, g, true, true, p.b.defined());
  return o;
}

// The forward's bf16 gradient of the logits as a float32 (N, V) tensor.
Tensor dlogits_of(const LinearCrossEntropyResult& r, int64_t n, int64_t v) {
  REQUIRE(r.dlogits != nullptr);
  REQUIRE(r.dlogits->nbytes() == size_t(n * v) * sizeof(bf16_t));
  const bf16_t* p = static_cast<const bf16_t*>(r.dlogits->data());
  Tensor out = empty({n, v});
  float* o = out.data<float>();
  for (int64_t i = 0; i < n * v; ++i) o[i] = bf16_to_float(p[i]);
  return out;
}

bool same_dlogits(const LinearCrossEntropyResult& a, const LinearCrossEntropyResult& b) {
  return a.dlogits && b.dlogits && a.dlogits->nbytes() == b.dlogits->nbytes() &&
         std::memcmp(a.dlogits->data(), b.dlogits->data(), a.dlogits->nbytes()) == 0;
}

bool same_double_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

std::vector<double> values(const Tensor& t) { return to_vector<double>(t.to(DType::f64)); }

// max over elements of |got - want| / bound (an equal element counts 0, whatever its bound).
double worst_ratio(const Tensor& got, const Tensor& want, const Tensor& bound) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(bound.shape() == want.shape());
  const std::vector<double> a = values(got), b = values(want), c = values(bound);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(a[i] - b[i]);
    if (diff == 0) continue;
    worst = std::max(worst, c[i] > 0 ? diff / c[i] : std::numeric_limits<double>::infinity());
  }
  return worst;
}

// A row of softmax - q sums to 0 (q sums to 1: 1 - eps on the target, eps / V on each class);
// rounding each element to bf16 moves the sum by at most 2^-8 of the sum of magnitudes. The
// largest |row sum| over that bound plus float32 noise (1e-5 of 1 / count); <= 1 when right.
double worst_row_sum(const Tensor& dl, int64_t count) {
  const int64_t n = dl.size(0), v = dl.size(1);
  const std::vector<double> a = values(dl);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0, m = 0;
    for (int64_t j = 0; j < v; ++j) s += a[i * v + j], m += std::abs(a[i * v + j]);
    worst = std::max(worst, std::abs(s) / (1.01 * kBf16Unit * m + 1e-5 / double(count)));
  }
  return worst;
}

// x with every element rounded to bfloat16 (still float32): bf16 products then read it exactly.
Tensor bf16_exact(const Tensor& x) {
  Tensor c = x.contiguous().clone();
  float* p = c.data<float>();
  for (int64_t i = 0; i < c.numel(); ++i) p[i] = bf16_to_float(bf16_round(p[i]));
  return c;
}

double max_abs(const Tensor& t) { return max(abs(t.to(DType::f64))).item(); }

Tensor int64_targets(const std::vector<int64_t>& t) {
  return from_vector<int64_t>(t, {static_cast<int64_t>(t.size())});
}

}  // namespace

TEST_CASE("linear_cross_entropy bf16: loss and dx dw db within bf16 tolerance of fp32 ops") {
  SKIP_WITHOUT_BF16();
  uint64_t seed = 11;
  for (const bool bias : {true, false}) {
    for (const double eps : {0.0, 0.1}) {
      for (const double g : {1.0, 0.5}) {
        const int64_t ignore = bias ? -100 : 0;  // 0: a class index, as a padding id
        const Problem p = lce_problem(bias, ignore, eps, seed++);
        INFO("bias " << bias << " smoothing " << eps << " upstream " << g << " ignore_index "
                     << ignore);
        const Reference ref = reference(p, g);
        const Fused f = fused(p, g);
        CHECK(ref.count == p.count);
        CHECK(f.r.count == p.count);
        CHECK(f.r.x.shape() == p.x.shape());
        CHECK(f.r.w.shape() == p.w.shape());
        // the loss: a mean of row terms, bf16 noise averages out
        const double loss_err = std::abs(f.r.loss - ref.loss) / ref.loss;
        INFO("loss " << f.r.loss << " vs fp32 " << ref.loss << ", relative error " << loss_err);
        CHECK(loss_err < 1e-3);
        // the gradient of the logits, as the forward left it (without g)
        const Tensor dl = dlogits_of(f.r, kN, kV);
        const double dl_err = rel_err(mul(dl, g), ref.dlogits);
        REQUIRE(f.g.dx.shape() == Shape{kN, kD});
        REQUIRE(f.g.dw.shape() == Shape{kV, kD});
        const double dx_err = rel_err(f.g.dx, ref.dx), dw_err = rel_err(f.g.dw, ref.dw);
        INFO("relative errors: dlogits " << dl_err << ", dx " << dx_err << ", dw " << dw_err);
        CHECK(dl_err < 1.5e-2);
        CHECK(dx_err < 1.5e-2);
        CHECK(dw_err < 1.5e-2);
        CHECK(dx_err > 0);  // the products did run in bf16
        // each row of softmax - q sums to 0: the smoothing and target terms together
        CHECK(worst_row_sum(dl, p.count) <= 1.0);
        // ignored rows: a zero gradient row, so a zero row of dx
        for (int64_t i :
             {int64_t(3), int64_t(127), int64_t(128), int64_t(255), int64_t(256), kN - 1}) {
          INFO("ignored row " << i);
          CHECK(max_abs(dl.select(0, i)) == 0);
          CHECK(max_abs(f.g.dx.select(0, i)) == 0);
        }
        if (bias) {
          REQUIRE(f.r.bias_grad.defined());
          REQUIRE(f.g.db.defined());
          const double db_err = rel_err(f.g.db, ref.db);
          INFO("db relative error " << db_err << ", sum " << sum(f.g.db.to(DType::f64)).item());
          CHECK(db_err < 1.5e-2);
          // sum_j db_j = g / count sum over rows of (sum_j softmax - q) = 0 up to float32 noise
          CHECK(std::abs(sum(f.g.db.to(DType::f64)).item()) < 1e-4 * g);
          // the backward scales the forward's column sums by g
          CHECK(max_abs(sub(f.g.db, mul(f.r.bias_grad, g))) <= 1e-7 * max_abs(f.g.db));
        } else {
          CHECK_FALSE(f.r.bias_grad.defined());
          CHECK_FALSE(f.g.db.defined());
        }
      }
    }
  }
}

TEST_CASE("linear_cross_entropy on bf16-exact inputs: fp32 loss, gradients up to their rounding") {
  SKIP_WITHOUT_BF16();
  // x and w exact in bf16: the bf16 products read them exactly, so the logits are the float32
  // composition's up to float32 accumulation, the loss is fp32's to 1e-5, and the gradients
  // differ only by rounding each element of dlogits (unit 2^-8) before the products:
  //   |dx - dl dx_ref| <= 2^-8 (|dl| |w|) + accumulation, dw likewise with x; db (the column
  // sums before rounding) to float32 accumulation.
  uint64_t seed = 51;
  for (const bool bias : {true, false}) {
    for (const double eps : {0.0, 0.1}) {
      const double g = bias ? 0.5 : 1.0;
      Problem p = lce_problem(bias, -100, eps, seed++);
      p.x = bf16_exact(p.x);
      p.w = bf16_exact(p.w);
      INFO("bias " << bias << " smoothing " << eps << " upstream " << g);
      const Reference ref = reference(p, g);
      const Fused f = fused(p, g);
      const double loss_err = std::abs(f.r.loss - ref.loss) / ref.loss;
      INFO("loss " << f.r.loss << " vs fp32 " << ref.loss << ", relative error " << loss_err);
      CHECK(loss_err < 1e-5);
      const double s = g / double(p.count);  // the scale of every gradient element
      const Tensor dl_ref = ref.dlogits.to(DType::f64), adl = abs(dl_ref);
      const Tensor x64 = p.x.to(DType::f64), w64 = p.w.to(DType::f64);
      // dlogits, each element: its rounding, and float32 noise of the softmax (1e-5 of g / count)
      const Tensor dl = mul(dlogits_of(f.r, kN, kV), g);
      const double dl_ratio = worst_ratio(dl, dl_ref, add(mul(adl, kBf16Unit), 2e-5 * s));
      // dx = dl w against the float64 product of the unrounded fp32 dlogits
      const Tensor dx_bound =
          add(mul(matmul(adl, abs(w64)), kBf16Unit + 2e-4), 2e-5 * s * max_abs(w64));
      const double dx_ratio = worst_ratio(f.g.dx, matmul(dl_ref, w64), dx_bound);
      // dw = dl^T x; the float32 noise of a column of dl summed over the rows of x
      const Tensor dlt = dl_ref.t().contiguous(), adlt = adl.t().contiguous();
      const Tensor dw_bound =
          add(mul(matmul(adlt, abs(x64)), kBf16Unit + 2e-4), mul(sum(abs(x64), {0}), 2e-5 * s));
      const double dw_ratio = worst_ratio(f.g.dw, matmul(dlt, x64), dw_bound);
      INFO("worst error over its bound: dlogits " << dl_ratio << ", dx " << dx_ratio << ", dw "
                                                  << dw_ratio);
      CHECK(dl_ratio <= 1.0);
      CHECK(dx_ratio <= 1.0);
      CHECK(dw_ratio <= 1.0);
      CHECK(dx_ratio > 0);  // not the fp32 products: the gradient was rounded
      if (bias) {
        REQUIRE(f.g.db.defined());
        const double db_ratio =
            worst_ratio(f.g.db, ref.db, add(mul(sum(adl, {0}), 1e-4), 1e-6 * s));
        INFO("db: worst error over 1e-4 of sum |dl|: " << db_ratio);
        CHECK(db_ratio <= 1.0);
      }
    }
  }
}

TEST_CASE("linear_cross_entropy bf16 gives the same bits twice and at 1 and 2 threads") {
  SKIP_WITHOUT_BF16();
  const Problem p = lce_problem(true, -100, 0.1, 71);
  auto at = [&](int threads) {
    const ScopedThreads n(threads);
    return fused(p, 0.5);
  };
  const Fused a = at(2), b = at(2), c = at(1);
  // The forward (loss, dlogits, the bias's column sums) does not depend on the thread count:
  // each chunk is one thread's, on a one-thread product.
  for (const Fused* o : {&b, &c}) {
    CHECK(same_double_bits(o->r.loss, a.r.loss));
    CHECK(same_dlogits(o->r, a.r));
    CHECK(same_bits(o->r.bias_grad, a.r.bias_grad));
    CHECK(same_bits(o->g.db, a.g.db));
  }
  // The backward's products are deterministic at a thread count ...
  CHECK(same_bits(b.g.dx, a.g.dx));
  CHECK(same_bits(b.g.dw, a.g.dw));
  {  // ... and at any under ThreadInvariantProducts
    const ThreadInvariantProducts invariant;
    const Fused i2 = at(2), i1 = at(1);
    CHECK(same_double_bits(i1.r.loss, a.r.loss));
    CHECK(same_dlogits(i1.r, a.r));
    CHECK(same_bits(i2.g.dx, i1.g.dx));
    CHECK(same_bits(i2.g.dw, i1.g.dw));
    CHECK(same_bits(i2.g.db, i1.g.db));
  }
  {  // twice in one scope: the bf16 copies of x and w reused
    const ScopedThreads two(2);
    PrecisionScope scope(Precision::bf16);
    const LinearCrossEntropyResult r1 =
        linear_cross_entropy_forward(p.x, p.w, p.b, p.t, p.ignore, p.eps, true);
    const LinearCrossEntropyGrads g1 = linear_cross_entropy_backward(r1, 0.5, true, true, true);
    const LinearCrossEntropyResult r2 =
        linear_cross_entropy_forward(p.x, p.w, p.b, p.t, p.ignore, p.eps, true);
    const LinearCrossEntropyGrads g2 = linear_cross_entropy_backward(r2, 0.5, true, true, true);
    CHECK(same_double_bits(r1.loss, a.r.loss));
    CHECK(same_double_bits(r2.loss, a.r.loss));
    CHECK(same_dlogits(r1, a.r));
    CHECK(same_dlogits(r2, a.r));
    CHECK(same_bits(g1.dx, a.g.dx));
    CHECK(same_bits(g2.dx, g1.dx));
    CHECK(same_bits(g2.dw, g1.dw));
    CHECK(same_bits(g2.db, a.g.db));
  }
}

TEST_CASE("linear_cross_entropy with every target ignored gives loss 0 and zero gradients") {
  SKIP_WITHOUT_BF16();
  for (const double eps : {0.0, 0.1}) {
    INFO("smoothing " << eps);
    Problem p = lce_problem(true, -100, eps, 81);
    int64_t* t = p.t.data<int64_t>();
    for (int64_t i = 0; i < kN; ++i) t[i] = -100;
    const Fused f = fused(p, 0.5);
    CHECK(f.r.count == 0);
    CHECK(f.r.loss == 0);
    CHECK(f.r.dlogits == nullptr);  // nothing to keep
    REQUIRE(f.g.dx.shape() == Shape{kN, kD});
    REQUIRE(f.g.dw.shape() == Shape{kV, kD});
    REQUIRE(f.g.db.shape() == Shape{kV});
    // max |.| == 0 fails on a NaN too
    CHECK(max_abs(f.g.dx) == 0);
    CHECK(max_abs(f.g.dw) == 0);
    CHECK(max_abs(f.g.db) == 0);
  }
  // no rows at all: the same, at the gradients' shapes
  Problem p = lce_problem(true, -100, 0.1, 82);
  p.x = zeros({0, kD});
  p.t = empty({0}, DType::i64);
  const Fused f = fused(p, 1.0);
  CHECK(f.r.count == 0);
  CHECK(f.r.loss == 0);
  CHECK(f.g.dx.shape() == Shape{0, kD});
  REQUIRE(f.g.dw.shape() == Shape{kV, kD});
  REQUIRE(f.g.db.shape() == Shape{kV});
  CHECK(max_abs(f.g.dw) == 0);
  CHECK(max_abs(f.g.db) == 0);
}

TEST_CASE("linear_cross_entropy without a gradient keeps none and gives the same loss bits") {
  SKIP_WITHOUT_BF16();
  for (const bool bias : {true, false}) {
    const double eps = bias ? 0.1 : 0.0;
    INFO("bias " << bias << " smoothing " << eps);
    const Problem p = lce_problem(bias, -100, eps, 91);
    const Fused with = fused(p, 1.0, true), without = fused(p, 1.0, false);
    CHECK(without.r.count == with.r.count);
    CHECK(without.r.dlogits == nullptr);
    CHECK_FALSE(without.r.bias_grad.defined());
    CHECK(with.r.dlogits != nullptr);
    CHECK(with.r.bias_grad.defined() == bias);
    CHECK(same_double_bits(without.r.loss, with.r.loss));
    CHECK(with.r.loss > 0);
  }
}

TEST_CASE("linear_cross_entropy names itself for bad targets shapes and dtypes") {
  SKIP_WITHOUT_BF16();
  Generator g(5);
  const int64_t n = 9, d = 6, v = 11;
  const Tensor x = randn({n, d}, g), w = randn({v, d}, g), b = randn({v}, g);
  const Tensor t = int64_targets({0, 1, 2, 3, 4, 5, 6, 7, 10});
  PrecisionScope scope(Precision::bf16);
  // the good call runs
  CHECK(linear_cross_entropy_forward(x, w, b, t, -100, 0.1, true).count == n);
  // targets out of [0, V), ignore_index aside
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(
                           x, w, b, int64_targets({0, 1, 2, 3, 4, 5, 6, 7, 11}), -100, 0, true),
                       "linear_cross_entropy", "target 11", "out of range");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(
                           x, w, b, int64_targets({0, 1, -1, 3, 4, 5, 6, 7, 8}), -100, 0, false),
                       "linear_cross_entropy", "target -1", "out of range");
  // ... while the ignored value itself may be anything
  CHECK(linear_cross_entropy_forward(x, w, b, int64_targets({0, 1, -1, 3, 4, 5, 6, 7, 8}), -1, 0,
                                     true)
            .count == n - 1);
  // shapes that do not fit
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x, randn({v, d + 1}, g), b, t, -100, 0, true),
                       "linear_cross_entropy", "do not fit");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x.reshape({n, d, 1}), w, b, t, -100, 0, true),
                       "linear_cross_entropy");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x, w, randn({v + 1}, g), t, -100, 0, true),
                       "linear_cross_entropy", "bias");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x, w, b, t.slice(0, 0, n - 1), -100, 0, true),
                       "linear_cross_entropy", "targets");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x, w, b, t.reshape({n, 1}), -100, 0, true),
                       "linear_cross_entropy", "targets");
  // dtypes: int64 targets, float32 operands
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x, w, b, zeros({n}), -100, 0, true),
                       "linear_cross_entropy", "int64");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x.to(DType::f64), w, b, t, -100, 0, true),
                       "linear_cross_entropy", "float32");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x, w, b.to(DType::f64), t, -100, 0, true),
                       "linear_cross_entropy", "float32");
  CHECK_ERROR_MENTIONS(linear_cross_entropy_forward(x, w, b, t, -100, 1.5, true),
                       "linear_cross_entropy", "label_smoothing");
}
