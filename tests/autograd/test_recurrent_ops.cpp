// ag::gru, ag::lstm and ag::conv1d (one tape node each, the backward written out in
// core/recurrent.cpp and core/conv1d.cpp): against their equations composed of plain ops
// (tests/support/recurrent.hpp) in float64, gradcheck, padding that changes nothing real,
// determinism, and the errors on bad input.
#include <catch2/catch.hpp>

#include "autograd/gradcheck.hpp"
#include "autograd/ops.hpp"
#include "support/recurrent.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::ag;
using namespace qkv::testing;

namespace {

Generator gen(69);

// (B, n) bool: row b real where its entry of rows is 1
Tensor mask_of(const std::vector<std::vector<int>>& rows) {
  std::vector<uint8_t> v;
  for (const auto& r : rows)
    for (int x : r) v.push_back(static_cast<uint8_t>(x));
  return from_vector(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

// The inputs of one layer: x, w_ih, w_hh, b_ih, b_hh, then h0 (and c0) when with_states.
std::vector<Var> layer_inputs(bool lstm, int64_t B, int64_t n, int64_t d, int64_t H, DType dt,
                              bool with_states) {
  const int64_t G = lstm ? 4 : 3;
  std::vector<Var> in = {leaf({B, n, d}, gen, dt), leaf({G * H, d}, gen, dt, -0.6, 0.6),
                         leaf({G * H, H}, gen, dt, -0.6, 0.6), leaf({G * H}, gen, dt, -0.3, 0.3),
                         leaf({G * H}, gen, dt, -0.3, 0.3)};
  if (with_states) in.push_back(leaf({B, H}, gen, dt));
  if (with_states && lstm) in.push_back(leaf({B, H}, gen, dt));
  return in;
}

RecurrentOut run(bool fused, bool lstm, const std::vector<Var>& in, const Tensor& valid,
                 bool reverse) {
  const Var h0 = in.size() > 5 ? in[5] : Var(), c0 = in.size() > 6 ? in[6] : Var();
  if (!fused)
    return unrolled_recurrence(lstm, in[0], valid, h0, c0, in[1], in[2], in[3], in[4], reverse);
  return lstm ? ag::lstm(in[0], valid, h0, c0, in[1], in[2], in[3], in[4], reverse)
              : ag::gru(in[0], valid, h0, in[1], in[2], in[3], in[4], reverse);
}

// out, h (and c) side by side along positions: (B, n + 1 (+ 1), H)
Var joined(const RecurrentOut& r) {
  std::vector<Var> parts = {r.out, unsqueeze(r.h, 1)};
  if (r.c.defined()) parts.push_back(unsqueeze(r.c, 1));
  return concat(parts, 1);
}

const char* cell_name(bool lstm) { return lstm ? "lstm" : "gru"; }

}  // namespace

TEST_CASE(
    "gru and lstm equal their unrolled equations in float64 in both directions with padding") {
  const Tensor prefix = mask_of({{1, 1, 1, 1, 1}, {1, 1, 0, 0, 0}, {0, 0, 0, 0, 0}});
  const Tensor holes = mask_of({{1, 0, 1, 1, 0}, {0, 1, 1, 0, 1}, {1, 1, 1, 1, 1}});
  for (bool lstm : {false, true})
    for (bool reverse : {false, true})
      for (const Tensor& valid : {Tensor(), prefix, holes})
        for (bool states : {false, true}) {
          INFO(cell_name(lstm) << " reverse " << reverse << " mask " << valid.defined()
                               << " states " << states);
          const std::vector<Var> in = layer_inputs(lstm, 3, 5, 4, 6, DType::f64, states);
          const Var a = joined(run(true, lstm, in, valid, reverse));
          const Var b = joined(run(false, lstm, in, valid, reverse));
          const Tensor R = randn(a.shape(), gen, DType::f64);
          CHECK(rel_err(a.data(), b.data()) < 1e-14);
          const std::vector<Tensor> ga = grad({a}, {R}, in), gb = grad({b}, {R}, in);
          for (size_t i = 0; i < in.size(); ++i) {
            INFO("input " << i);
            CHECK(rel_err(ga[i], gb[i]) < 1e-12);
          }
        }
}

TEST_CASE("gradcheck: gru and lstm in float64, both directions, padded, with initial states") {
  const ScopedThreads one(1);
  const Tensor valid = mask_of({{1, 1, 1, 1}, {1, 1, 1, 0}, {0, 0, 0, 0}});
  for (bool lstm : {false, true})
    for (bool reverse : {false, true})
      for (bool states : {false, true}) {
        INFO(cell_name(lstm) << " reverse " << reverse << " states " << states);
        const std::vector<Var> in = layer_inputs(lstm, 3, 4, 3, 5, DType::f64, states);
        const GradcheckReport r = gradcheck(
            [&](const std::vector<Var>& v) { return joined(run(true, lstm, v, valid, reverse)); },
            in);
        INFO(r.summary());
        CHECK(r.passed);
        CHECK(r.inputs.size() == in.size());
      }
}

TEST_CASE("gradcheck: conv1d in float64, dilated, causal, padded, odd and even kernels") {
  const ScopedThreads one(1);
  const Tensor valid = mask_of({{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0}});
  for (int64_t k : {1, 2, 3})
    for (int64_t dilation : {1, 2})
      for (bool causal : {false, true})
        for (bool bias : {false, true}) {
          INFO("k " << k << " dilation " << dilation << " causal " << causal << " bias " << bias);
          std::vector<Var> in = {leaf({2, 6, 3}, gen), leaf({4, 3, k}, gen)};
          if (bias) in.push_back(leaf({4}, gen));
          const GradcheckReport r = gradcheck(
              [&](const std::vector<Var>& v) {
                return conv1d(v[0], v[1], v.size() > 2 ? v[2] : Var(), valid, dilation, causal);
              },
              in);
          INFO(r.summary());
          CHECK(r.passed);
        }
}

TEST_CASE("conv1d equals its taps composed in float64, kernels wider than the sequence included") {
  const Tensor valid = mask_of({{1, 1, 1, 1, 1}, {1, 1, 0, 0, 0}, {0, 1, 1, 0, 1}});
  for (int64_t k : {1, 2, 3, 4, 7})
    for (int64_t dilation : {1, 3})
      for (bool causal : {false, true})
        for (const Tensor& mask : {Tensor(), valid}) {
          INFO("k " << k << " dilation " << dilation << " causal " << causal << " mask "
                    << mask.defined());
          const std::vector<Var> in = {leaf({3, 5, 4}, gen), leaf({6, 4, k}, gen), leaf({6}, gen)};
          const Var a = conv1d(in[0], in[1], in[2], mask, dilation, causal);
          const Var b = composed_conv1d(in[0], in[1], in[2], mask, dilation, causal);
          CHECK(rel_err(a.data(), b.data()) < 1e-14);
          const Tensor R = randn(a.shape(), gen, DType::f64);
          const std::vector<Tensor> ga = grad({a}, {R}, in), gb = grad({b}, {R}, in);
          for (size_t i = 0; i < in.size(); ++i) CHECK(rel_err(ga[i], gb[i]) < 1e-13);
        }
}

TEST_CASE("recurrences and conv1d: what sits at a padded position changes nothing real") {
  const Tensor valid = mask_of({{1, 1, 1, 0, 0, 0}, {1, 1, 1, 1, 1, 1}});
  const Tensor pad = logical_not(valid).unsqueeze(2);
  for (int kind = 0; kind < 5; ++kind) {  // gru, gru reverse, lstm, lstm reverse, conv1d
    INFO("kind " << kind);
    const bool lstm = kind >= 2, reverse = kind % 2 == 1;
    std::vector<Var> in = kind < 4 ? layer_inputs(lstm, 2, 6, 3, 4, DType::f32, true)
                                   : std::vector<Var>{leaf({2, 6, 3}, gen, DType::f32),
                                                      leaf({4, 3, 3}, gen, DType::f32)};
    auto forward = [&](const std::vector<Var>& v) {
      return kind < 4 ? joined(run(true, lstm, v, valid, reverse))
                      : conv1d(v[0], v[1], Var(), valid, 2, false);
    };
    const Var a = forward(in);
    std::vector<Var> noisy = in;
    noisy[0] = Var(masked_fill(in[0].data(), pad, 1e3), true);
    const Var b = forward(noisy);
    CHECK(same_bits(a.data(), b.data()));
    const Tensor R = randn(a.shape(), gen);
    const Tensor dx = grad({b}, {R}, {noisy[0]})[0];
    CHECK(max(abs(masked_fill(dx, logical_not(pad), 0.0))).item() == 0.0);  // none at padding
    CHECK(max(abs(dx)).item() > 0.0);
  }
}

TEST_CASE("recurrences and conv1d are deterministic bit for bit on 2 threads") {
  const ScopedThreads two(2);
  const Tensor valid = mask_of(std::vector<std::vector<int>>(32, {1, 1, 1, 1, 1, 1, 1, 1, 0}));
  for (int kind = 0; kind < 3; ++kind) {  // gru, lstm reverse, conv1d
    INFO("kind " << kind);
    std::vector<Var> in = kind < 2 ? layer_inputs(kind == 1, 32, 9, 40, 48, DType::f32, true)
                                   : std::vector<Var>{leaf({32, 9, 40}, gen, DType::f32),
                                                      leaf({48, 40, 3}, gen, DType::f32)};
    auto once = [&] {
      const Var y = kind < 2 ? joined(run(true, kind == 1, in, valid, kind == 1))
                             : conv1d(in[0], in[1], Var(), valid, 1, true);
      std::vector<Tensor> r = grad({y}, {ones(y.shape())}, in);
      r.push_back(y.data());
      return r;
    };
    const std::vector<Tensor> a = once(), b = once();
    for (size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i], b[i]));
  }
}

TEST_CASE("recurrent and conv1d ops name the op and the shapes on bad input") {
  const std::vector<Var> in = layer_inputs(false, 2, 3, 4, 5, DType::f32, false);
  CHECK_ERROR_MENTIONS(gru(in[0], Tensor(), Var(), in[2], in[2], in[3], in[4]), "gru", "w_ih");
  CHECK_ERROR_MENTIONS(lstm(in[0], Tensor(), Var(), Var(), in[1], in[2], in[3], in[4]), "lstm",
                       "w_hh");
  CHECK_ERROR_MENTIONS(gru(in[0], mask_of({{1, 1}, {1, 0}}), Var(), in[1], in[2], in[3], in[4]),
                       "gru", "valid", "(2, 3)");
  CHECK_ERROR_MENTIONS(gru(in[0], Tensor(), Var(zeros({2, 4})), in[1], in[2], in[3], in[4]), "gru",
                       "h0", "(2, 4)");
  CHECK_ERROR_MENTIONS(conv1d(in[0], Var(zeros({3, 5, 2})), Var(), Tensor()), "conv1d", "(3, 5, 2)",
                       "(2, 3, 4)");
  CHECK_ERROR_MENTIONS(conv1d(in[0], Var(zeros({3, 4, 2})), Var(), Tensor(), 0), "conv1d",
                       "dilation");
}
