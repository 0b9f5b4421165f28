// The fused ops that replaced compositions of small ops, ag::rotary and ag::relu_squared:
// against central differences in float64, and against the compositions they replaced in
// float32 (the same forward bits, the same gradient values).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.hpp"
#include "autograd/ops.hpp"
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
