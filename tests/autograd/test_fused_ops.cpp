// The fused ops that replaced compositions of small ops, ag::rotary, ag::relu_squared and
// ag::linear_act:
// against central differences in float64, and against the compositions they replaced in
// float32 (the same forward bits, the same gradient values).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.hpp"
#include "autograd/ops.hpp"
#include "core/bf16_cache.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using qkv::testing::rope_tables;
using namespace qkv::ag;

namespace {

using Ins = const std::vector<Var>&;

// x rotated at positions offset, offset + 1, ... along dim -2 by the fused op.
Var fused_rotary(const Var& x, int64_t offset) {
  const auto [c, s] = rope_tables(x.size(-2), x.size(-1), offset, x.dtype());
  return rotary(x, c, s);
}

// nn::rotary as it was composed before the fused op: slices, four products, a difference and
// a sum, stacked back into pairs.
Var composed_rotary(const Var& x, int64_t offset) {
  const int64_t d = x.size(-1);
  const auto [c, s] = rope_tables(x.size(-2), d, offset, x.dtype());
  const Var cv = constant(c), sv = constant(s);
  const Var even = slice(x, -1, 0, d, 2), odd = slice(x, -1, 1, d, 2);
  const Var re = sub(mul(even, cv), mul(odd, sv));
  const Var ro = add(mul(even, sv), mul(odd, cv));
  return reshape(stack({re, ro}, re.dim()), x.shape());
}

void check(const GradcheckFn& f, const std::vector<Var>& in) {
  const GradcheckReport r = gradcheck(f, in);
  INFO(r.summary());
  CHECK(r.passed);
}

}  // namespace

TEST_CASE("gradcheck: rotary at offsets, on strided views and split across threads") {
  Generator g(41);
  auto f = [](int64_t offset) { return [offset](Ins in) { return fused_rotary(in[0], offset); }; };
  check(f(3), {testing::leaf({2, 3, 5, 6}, g)});
  check(f(0), {testing::leaf({7, 10}, g)});
  // (B, n, h, d) seen as (B, h, n, d), as split_heads gives; a last dim with stride 2
  check(f(11), {Var(uniform({2, 5, 3, 6}, -1, 1, g, DType::f64).transpose(1, 2), true)});
  check(f(2), {Var(uniform({3, 5, 12}, -1, 1, g, DType::f64).slice(-1, 0, 12, 2), true)});
  // 2 x 4 x 67 x 66 = 35376 elements (33 pairs a row): the threaded path, checked by directions
  check(f(5), {testing::leaf({2, 4, 67, 66}, g)});
}

TEST_CASE(
    "fused rotary equals the composed rotation in float32, forward bits and gradient values") {
  Generator g(42);
  const Tensor x0 = mul(randn({2, 67, 4, 66}, g), 3.0);
  Tensor dy = randn({2, 4, 67, 66}, g);
  dy.narrow(2, 0, 3).zero_();  // rows with no gradient, as padded queries get
  for (const int64_t offset : {int64_t{0}, int64_t{9}}) {
    INFO("offset " << offset);
    const Var xf(x0.transpose(1, 2), true), xc(x0.transpose(1, 2), true);  // strided head views
    const Var yf = fused_rotary(xf, offset), yc = composed_rotary(xc, offset);
    CHECK(testing::same_bits(yf.data(), yc.data()));
    yf.backward(dy);
    yc.backward(dy);
    CHECK(max_abs_diff(xf.grad(), xc.grad()) == 0);
    // Bits too, but for the sign of zero: the composed gradient summed the two slices'
    // zero-padded gradients, turning a -0 (0 c + 0 s with c, s < 0) into +0.
    CHECK(testing::same_bits(add(xf.grad(), 0.0), xc.grad()));
  }
}

TEST_CASE("gradcheck: relu_squared, plain, strided and split across threads") {
  Generator g(43);
  auto f = [](Ins in) { return relu_squared(in[0]); };
  check(f, {testing::leaf({3, 4}, g)});
  check(f, {testing::leaf({7, 13}, g)});  // 91 elements: not a multiple of the vector width
  check(f, {Var(uniform({13, 7}, -1, 1, g, DType::f64).t(), true)});
  check(f, {testing::leaf({181, 183}, g)});  // 33123 elements: the threaded path
}

TEST_CASE("fused relu_squared equals relu then mul in float32, forward and gradient bits") {
  Generator g(44);
  Tensor x0 = mul(randn({181, 183}, g), 2.0);
  x0.narrow(1, 0, 2).zero_();  // exact zeros, where relu's gradient is 0
  const Tensor dy = randn({183, 181}, g).t();
  const Var xf(x0, true), xc(x0, true);
  const Var yf = relu_squared(xf), r = relu(xc), yc = mul(r, r);
  CHECK(testing::same_bits(yf.data(), yc.data()));
  yf.backward(dy);
  yc.backward(dy);
  CHECK(testing::same_bits(xf.grad(), xc.grad()));
  // Nothing to record: the same output, and no backward kept
  NoGrad no_grad;
  const Var y = relu_squared(xf);
  CHECK(testing::same_bits(y.data(), yc.data()));
  CHECK(y.is_leaf());
}

namespace {

// relu or gelu of linear(x, w, b), composed of the two ops.
Var composed_linear_act(const Var& x, const Var& w, const Var& b, LinearAct act) {
  const Var pre = linear(x, w, b);
  return act == LinearAct::relu ? relu(pre) : gelu(pre);
}

const char* act_name(LinearAct a) { return a == LinearAct::relu ? "relu" : "gelu"; }

}  // namespace

TEST_CASE("gradcheck: linear_act, ReLU and GELU, with and without a bias, batched rows") {
  Generator g(45);
  for (const LinearAct act : {LinearAct::relu, LinearAct::gelu}) {
    INFO(act_name(act));
    check([act](Ins in) { return linear_act(in[0], in[1], in[2], act); },
          {testing::leaf({2, 3, 5}, g), testing::leaf({4, 5}, g), testing::leaf({4}, g)});
    check([act](Ins in) { return linear_act(in[0], in[1], Var(), act); },
          {testing::leaf({7, 6}, g), testing::leaf({9, 6}, g)});
  }
}

// The fused layer against linear then relu or gelu, forward and backward, bit for bit: in
// float32 and in a bf16 scope, where the activation runs in the product's epilogue. The
// order of operations is the composed ops' in both (the same product, then the same
// elementwise expressions on each element), so nothing differs. Sizes: 300 rows over 2
// threads cut into bands, and 5 rows (one product on one thread, its epilogue after it).
TEST_CASE("fused linear_act equals linear then the activation, float32 and bf16, bit for bit") {
  const int before = get_num_threads();
  set_num_threads(2);
  Generator g(46);
  for (const Precision p : {Precision::fp32, Precision::bf16}) {
    if (p == Precision::bf16 && !bf16_unsupported_reason().empty()) continue;
    for (const int64_t rows : {int64_t{300}, int64_t{5}})
      for (const LinearAct act : {LinearAct::relu, LinearAct::gelu}) {
        INFO(precision_name(p) << ", " << rows << " rows, " << act_name(act));
        const Tensor x0 = randn({rows, 70}, g), w0 = mul(randn({200, 70}, g), 0.2);
        const Tensor b0 = randn({200}, g), dy = randn({rows, 200}, g);
        const Var xf(x0, true), wf(w0, true), bf(b0, true);
        const Var xc(x0, true), wc(w0, true), bc(b0, true);
        {
          PrecisionScope scope(p);  // forward and backward in one scope, as a training step
          const Var yf = linear_act(xf, wf, bf, act);
          const Var yc = composed_linear_act(xc, wc, bc, act);
          CHECK(testing::same_bits(yf.data(), yc.data()));
          yf.backward(dy);
          yc.backward(dy);
        }
        CHECK(testing::same_bits(xf.grad(), xc.grad()));
        CHECK(testing::same_bits(wf.grad(), wc.grad()));
        CHECK(testing::same_bits(bf.grad(), bc.grad()));
      }
  }
  set_num_threads(before);
}

namespace {

// The residual add and the norm after it, fused (rms: add_rms_norm) or composed of add and the
// norm; sum receives x + a when given.
Var add_norm(const Var& x, const Var& a, const Var& gamma, const Var& beta, bool rms, bool fused,
             Var* sum) {
  const double eps = 1e-5;
  if (fused)
    return rms ? add_rms_norm(x, a, gamma, eps, sum) : add_layer_norm(x, a, gamma, beta, eps, sum);
  const Var s = add(x, a);
  if (sum) *sum = s;
  return rms ? rms_norm(s, gamma, eps) : layer_norm(s, gamma, beta, eps);
}

}  // namespace

TEST_CASE("gradcheck: add_layer_norm and add_rms_norm, with and without the sum, threaded rows") {
  Generator g(47);
  for (const bool rms : {false, true})
    for (const bool keep_sum : {false, true}) {
      INFO((rms ? "rms" : "layer") << (keep_sum ? ", sum kept" : ""));
      // the sum, when kept, flows on beside the norm (as pre-LN's residual stream)
      auto f = [rms, keep_sum](Ins in) {
        Var s;
        const Var h =
            add_norm(in[0], in[1], in[2], rms ? Var() : in[3], rms, true, keep_sum ? &s : nullptr);
        return keep_sum ? add(h, mul(s, 0.5)) : h;
      };
      check(f, {testing::leaf({2, 3, 5}, g), testing::leaf({2, 3, 5}, g), testing::leaf({5}, g),
                testing::leaf({5}, g)});
      // 260 rows of 64: split across threads
      check(f, {testing::leaf({260, 64}, g), testing::leaf({260, 64}, g), testing::leaf({64}, g),
                testing::leaf({64}, g)});
    }
  // shapes that differ (a broadcast) take the composed ops
  check([](Ins in) { return add_layer_norm(in[0], in[1], in[2], in[3], 1e-5); },
        {testing::leaf({3, 4}, g), testing::leaf({4}, g), testing::leaf({4}, g),
         testing::leaf({4}, g)});
}

// The fused add and norm against add then the norm, forward and backward, bit for bit, in
// float32 and in a bf16 scope (the norm's output rounded in its pass for the product after
// it; without the sum, dx rounded in the backward's pass for the product behind a). The order
// of operations is the composed ops' on each element, so nothing differs. 300 rows over 2
// threads and 5 rows on one.
TEST_CASE("fused add_layer_norm and add_rms_norm equal add then the norm, float32 and bf16") {
  const int before = get_num_threads();
  set_num_threads(2);
  Generator g(48);
  for (const Precision p : {Precision::fp32, Precision::bf16}) {
    if (p == Precision::bf16 && !bf16_unsupported_reason().empty()) continue;
    for (const int64_t rows : {int64_t{300}, int64_t{5}})
      for (const bool rms : {false, true})
        for (const bool keep_sum : {false, true}) {
          INFO(precision_name(p) << ", " << rows << " rows, " << (rms ? "rms" : "layer")
                                 << (keep_sum ? ", sum kept" : ""));
          const Tensor x0 = randn({rows, 96}, g), z0 = randn({rows, 40}, g);
          const Tensor wa0 = mul(randn({96, 40}, g), 0.2), wo0 = mul(randn({50, 96}, g), 0.2);
          const Tensor ga0 = add(mul(randn({96}, g), 0.1), 1.0), be0 = randn({96}, g);
          const Tensor dy = randn({rows, 50}, g), ds = randn({rows, 96}, g);
          struct Side {
            Var x, z, wa, wo, gamma, beta;
          };
          // copies: the sides share no storage, so neither reuses the other's bf16 copies
          auto make = [&] {
            return Side{Var(x0.clone(), true),  Var(z0.clone(), true),  Var(wa0.clone(), true),
                        Var(wo0.clone(), true), Var(ga0.clone(), true), Var(be0.clone(), true)};
          };
          Side f = make(), c = make();
          {
            PrecisionScope scope(p);
            // a: a product's output; the norm's output: a product's input
            auto run = [&](Side& v, bool fused) {
              Var s;
              const Var a = linear(v.z, v.wa, Var());
              const Var h = add_norm(v.x, a, v.gamma, rms ? Var() : v.beta, rms, fused,
                                     keep_sum ? &s : nullptr);
              const Var y = linear(h, v.wo, Var());
              return std::pair{y, s};
            };
            // Each side's roundings: in bf16 the fused op writes the norm's copy for the next
            // product (1 fewer forward) and, without the sum, dx's copy for a's product (1
            // fewer backward).
            const uint64_t f0 = detail::bf16_activation_roundings();
            const auto [yf, sf] = run(f, true);
            const uint64_t f1 = detail::bf16_activation_roundings();
            const auto [yc, sc] = run(c, false);
            if (p == Precision::bf16)
              CHECK(detail::bf16_activation_roundings() - f1 == f1 - f0 + 1);
            CHECK(testing::same_bits(yf.data(), yc.data()));
            const uint64_t r0 = detail::bf16_activation_roundings();
            if (keep_sum) {  // the loss reads both: sum(y dy) + sum(s ds)
              CHECK(testing::same_bits(sf.data(), sc.data()));
              auto loss = [&](const Var& y, const Var& s) {
                return add(sum(mul(y, constant(dy.clone()))), sum(mul(s, constant(ds.clone()))));
              };
              loss(yf, sf).backward();
              const uint64_t r1 = detail::bf16_activation_roundings();
              loss(yc, sc).backward();
              if (p == Precision::bf16) CHECK(detail::bf16_activation_roundings() - r1 == r1 - r0);
            } else {
              yf.backward(dy);
              const uint64_t r1 = detail::bf16_activation_roundings();
              yc.backward(dy.clone());
              if (p == Precision::bf16)
                CHECK(detail::bf16_activation_roundings() - r1 == r1 - r0 + 1);
            }
          }
          CHECK(testing::same_bits(f.x.grad(), c.x.grad()));
          CHECK(testing::same_bits(f.z.grad(), c.z.grad()));
          CHECK(testing::same_bits(f.wa.grad(), c.wa.grad()));
          CHECK(testing::same_bits(f.wo.grad(), c.wo.grad()));
          CHECK(testing::same_bits(f.gamma.grad(), c.gamma.grad()));
          if (!rms) CHECK(testing::same_bits(f.beta.grad(), c.beta.grad()));
        }
  }
  set_num_threads(before);
}
