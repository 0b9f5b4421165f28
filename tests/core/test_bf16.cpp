// bfloat16 rounding against its reference, and the bf16 products (oneDNN) of the linear layers
// against float64 products of the rounded operands, at every transpose combination and at
// shapes that cross oneDNN's and qkv's tile boundaries.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/bf16.hpp"
#include "core/bf16_cache.hpp"
#include "core/fused.hpp"
#include "core/onednn.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// A float64 copy of x's values after rounding each to bfloat16.
Tensor rounded(const Tensor& x) {
  Tensor c = x.contiguous().clone();
  float* p = c.data<float>();
  for (int64_t i = 0; i < c.numel(); ++i) p[i] = bf16_to_float(bf16_round(p[i]));
  return c.to(DType::f64);
}

// Largest |a - b| over max(1, |b|): a is float32, b float64.
double max_rel_err(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(DType::f64).contiguous(), b64 = b.contiguous();
  double e = 0;
  for (int64_t i = 0; i < a64.numel(); ++i) {
    const double r = b64.data<double>()[i];
    e = std::max(e, std::abs(a64.data<double>()[i] - r) / std::max(1.0, std::abs(r)));
  }
  return e;
}

// t of the given logical shape, stored either row-major or as the transpose of a stored matrix.
Tensor maybe_transposed(const Shape& s, bool trans, Generator& g) {
  return trans ? randn({s[1], s[0]}, g).t() : randn(s, g);
}

}  // namespace

TEST_CASE("bf16_round: ties to even, NaN, Inf, subnormals, overflow") {
  CHECK(bf16_round(1.0f) == 0x3f80);
  CHECK(bf16_round(from_bits(0x3f808000u)) == 0x3f80);  // tie, even below
  CHECK(bf16_round(from_bits(0x3f818000u)) == 0x3f82);  // tie, even above
  CHECK(bf16_round(from_bits(0x3f808001u)) == 0x3f81);  // above the tie
  CHECK(bf16_round(from_bits(0x3f807fffu)) == 0x3f80);  // below the tie
  CHECK(bf16_round(-2.5f) == 0xc020);
  CHECK(bf16_round(INFINITY) == 0x7f80);
  CHECK(bf16_round(-INFINITY) == 0xff80);
  CHECK(bf16_round(from_bits(0x7f7fffffu)) == 0x7f80);    // FLT_MAX rounds past bf16's max
  CHECK(bf16_round(from_bits(0x7f7f0000u)) == 0x7f7f);    // bf16's max is exact
  const bf16_t nan = bf16_round(from_bits(0x7f800001u));  // a signalling NaN with a low payload
  CHECK(std::isnan(bf16_to_float(nan)));
  CHECK(nan == 0x7fc0);
  CHECK(bf16_round(from_bits(0xffc00001u)) == 0xffc0);
  CHECK(bf16_round(from_bits(0x00000001u)) == 0x0000);  // subnormals become signed zeros
  CHECK(bf16_round(from_bits(0x807fffffu)) == 0x8000);
  CHECK(bf16_round(from_bits(0x00800000u)) == 0x0080);  // the smallest normal stays
  CHECK(bf16_round(-0.0f) == 0x8000);
  CHECK(bf16_to_float(0x3f80) == 1.0f);
}

TEST_CASE("to_bf16: the same bits as bf16_round at every length and on every kind of value") {
  std::vector<float> src(1000);
  uint32_t state = 12345;
  for (size_t i = 0; i < src.size(); ++i) {  // random bit patterns cover NaNs and subnormals too
    state = state * 1664525u + 1013904223u;
    src[i] = from_bits(state);
  }
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x00000001u,
                               0x80000001u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x80000000u};
  for (size_t i = 0; i < std::size(specials); ++i) src[3 * i + 1] = from_bits(specials[i]);
  for (int64_t n : {0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 999, 1000}) {
    std::vector<bf16_t> out(n + 1, 0xabcd);
    to_bf16(src.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      INFO("n " << n << " i " << i);
      REQUIRE(out[i] == bf16_round(src[i]));
    }
    CHECK(out[n] == 0xabcd);  // nothing written past the end
  }
  std::vector<float> big(3 * 40000 + 7);
  for (size_t i = 0; i < big.size(); ++i) big[i] = std::sin(0.001 * double(i)) * 1e3f;
  std::vector<bf16_t> packed(big.size());
  to_bf16_rows(big.data(), 3, 40000, 40002, packed.data());  // strided rows, threaded
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 40000; c += 997)
      REQUIRE(packed[r * 40000 + c] == bf16_round(big[r * 40002 + c]));
}

TEST_CASE("precision names parse and print, unknown names are errors") {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::auto_})
    CHECK(parse_precision(precision_name(p)) == p);
  CHECK_THROWS_WITH(parse_precision("fp16"), "precision: must be fp32, bf16 or auto, got 'fp16'");
  CHECK_THROWS_WITH(parse_precision("bf61"),
                    "precision: must be fp32, bf16 or auto, got 'bf61'; did you mean 'bf16'?");
  CHECK_THROWS_WITH(parse_precision("fp16", "--precision"), Catch::StartsWith("--precision: "));
  CHECK(resolve_precision(Precision::fp32) == Precision::fp32);
  const Precision a = resolve_precision(Precision::auto_);
  CHECK(a == (bf16_unsupported_reason().empty() ? Precision::bf16 : Precision::fp32));
  CHECK(current_precision() == Precision::fp32);
}

TEST_CASE(
    "bf16 linear products against float64 of rounded operands, each transpose, 1 and 2 threads") {
  SKIP_WITHOUT_BF16();
  Generator g(7);
  // Sizes crossing 16-row bands, 32-wide vectors and oneDNN's brgemm blocks (16, 32, 64); the
  // larger ones run in one band per thread (by rows, by columns, a ragged last band), and
  // {520, 520, 1100}'s dx (k 1100 over a 520 x 520 result) on oneDNN's own split of k.
  const int64_t sizes[][3] = {{1, 1, 1},       {3, 5, 7},      {17, 33, 15},
                              {64, 64, 64},    {65, 31, 129},  {130, 65, 256},
                              {768, 128, 128}, {300, 97, 513}, {520, 520, 1100}};
  for (const auto& s : sizes) {
    const int64_t n = s[0], in = s[1], out = s[2];
    for (int combo = 0; combo < 8; ++combo) {
      const bool tx = combo & 1, tw = combo & 2;
      const ScopedThreads threads(combo & 4 ? 2 : 1);
      INFO("n " << n << " in " << in << " out " << out << " x^T " << tx << " w^T " << tw
                << " threads " << get_num_threads());
      const Tensor x = maybe_transposed({n, in}, tx, g), w = maybe_transposed({out, in}, tw, g);
      const Tensor b = randn({out}, g), gy = maybe_transposed({n, out}, tx, g);
      Tensor y, dx, dw;
      {
        PrecisionScope scope(Precision::bf16);
        y = linear_forward(x, w, b);
        dx = linear_input_grad(gy, w);
        dw = linear_weight_grad(gy, x);
      }
      const Tensor x64 = rounded(x), w64 = rounded(w), g64 = rounded(gy);
      const Tensor y_ref = matmul(x64, w64.t()) + b.to(DType::f64);
      // f32 accumulation of exact bf16 products: error ~ k * 2^-24 relative to the row's scale
      const double tol = 2e-6 * std::sqrt(double(std::max(in, out) + n));
      CHECK(max_rel_err(y, y_ref) < tol);
      CHECK(max_rel_err(dx, matmul(g64, w64)) < tol);
      CHECK(max_rel_err(dw, matmul(g64.t(), x64)) < tol);
    }
  }
}

// A decoding step's products have one row (a token) where the full forward's have hundreds, and
// oneDNN may pick another kernel for them (on AMX CPUs it does), summing each dot product in
// another order. The bound, for any two orders: each float32 sum of the k + 1 terms (k exact
// products of bf16 operands: 8 x 8 significant bits fit float32's 24; and the bias) is within
// gamma(k) * sum|terms| of the exact sum, gamma(k) = k u / (1 - k u), u = 2^-24 (Higham,
// Accuracy and Stability of Numerical Algorithms, 4.2), so two orders are within twice that
// of each other. Both rows are also within gamma(k) of the exact product of the rounded
// operands: the one-row product rounds its operands as the many-row one does.
TEST_CASE("a bf16 product's row alone and among many rows: within float32 summation's bound") {
  SKIP_WITHOUT_BF16();
  Generator g(19);
  const int64_t sizes[][3] = {{130, 64, 67}, {260, 96, 384}, {70, 383, 129}};  // n, in, out
  for (const auto& s : sizes) {
    const int64_t n = s[0], in = s[1], out = s[2];
    INFO("n " << n << " in " << in << " out " << out);
    const Tensor x = randn({n, in}, g), w = randn({out, in}, g), b = randn({out}, g);
    Tensor many, fp32_row;
    std::vector<Tensor> alone;
    {
      PrecisionScope scope(Precision::bf16);
      many = linear_forward(x, w, b);
      for (int64_t i : {int64_t(0), n / 2, n - 1})
        alone.push_back(linear_forward(x.narrow(0, i, 1), w, b));
    }
    fp32_row = linear_forward(x.narrow(0, 0, 1), w, b);
    const Tensor x64 = rounded(x), w64 = rounded(w), b64 = b.to(DType::f64);
    const Tensor exact = matmul(x64, w64.t()) + b64;
    const Tensor scale = matmul(abs(x64), abs(w64).t()) + abs(b64);  // sum |terms| (n, out)
    const double u = std::ldexp(1.0, -24), gamma = (in + 1) * u / (1 - (in + 1) * u);
    int row = 0;
    for (int64_t i : {int64_t(0), n / 2, n - 1}) {
      const Tensor a = alone[row++].to(DType::f64).reshape({out});
      const Tensor m = many.select(0, i).to(DType::f64), e = exact.select(0, i);
      const Tensor bound = scale.select(0, i);
      for (int64_t j = 0; j < out; ++j) {
        const double aj = a.data<double>()[j], mj = m.data<double>()[j], ej = e.data<double>()[j];
        const double bj = bound.data<double>()[j];
        INFO("row " << i << " column " << j << ": alone " << aj << ", among many " << mj);
        REQUIRE(std::abs(aj - mj) <= 2 * gamma * bj);
        REQUIRE(std::abs(aj - ej) <= gamma * bj);
      }
    }
    CHECK_FALSE(same_bits(alone[0], fp32_row));  // the one-row product did run in bf16
  }
}

TEST_CASE("bf16 weight copies are made once per scope and remade in the next one") {
  SKIP_WITHOUT_BF16();
  Generator g(3);
  const Tensor x = randn({40, 24}, g), b = zeros({16});
  Tensor w = randn({16, 24}, g);
  Tensor y1, y_again;
  {
    PrecisionScope scope(Precision::bf16);
    y1 = linear_forward(x, w, b);
    y_again = linear_forward(x, w, b);
  }
  CHECK(max_rel_err(y_again, y1.to(DType::f64)) == 0);  // same copy, same primitive: same bits
  w.fill_(0.5);  // what an optimizer step does between scopes
  Tensor y2;
  {
    PrecisionScope scope(Precision::bf16);
    y2 = linear_forward(x, w, b);
  }
  CHECK(max_rel_err(y2, matmul(rounded(x), rounded(w).t())) < 1e-5);
  // Outside a scope the products are float32 on OpenBLAS, bit for bit matmul's.
  CHECK(max_rel_err(linear_input_grad(x, w.t()), matmul(x, w.t()).to(DType::f64)) == 0);
}

TEST_CASE("bf16 activation copies are made once per scope and remade after an in-place write") {
  SKIP_WITHOUT_BF16();
  Generator g(5);
  Tensor x = randn({37, 50}, g);
  const Tensor x_new = randn({37, 50}, g), w = randn({29, 50}, g), b = zeros({29});
  const Tensor gy = randn({37, 29}, g);
  Tensor y_new_fresh;
  {
    PrecisionScope scope(Precision::bf16);
    y_new_fresh = linear_forward(x_new, w, b);
  }
  PrecisionScope scope(Precision::bf16);
  const uint64_t r0 = detail::bf16_activation_roundings();
  const Tensor y1 = linear_forward(x, w, b);
  CHECK(detail::bf16_activation_roundings() == r0 + 1);  // x
  const Tensor y_again = linear_forward(x, w, b);
  (void)linear_weight_grad(gy, x);                       // reads x again, and gy for the first time
  (void)linear_input_grad(gy, w);                        // gy again
  CHECK(detail::bf16_activation_roundings() == r0 + 2);  // x and gy, once each
  CHECK(same_bits(y_again, y1));
  // x changes in place: the next product must read the new contents, not the old copy
  x.copy_(x_new);
  const Tensor y2 = linear_forward(x, w, b);
  CHECK(detail::bf16_activation_roundings() == r0 + 3);
  CHECK(same_bits(y2, y_new_fresh));
  CHECK_FALSE(same_bits(y2, y1));
  x.fill_(0.25);
  CHECK(max_rel_err(linear_forward(x, w, b), matmul(rounded(x), rounded(w).t())) < 1e-5);
  // another view of the same storage is another matrix
  const Tensor rows = x_new.slice(0, 3, 20);
  CHECK(max_rel_err(linear_forward(rows, w, b), matmul(rounded(rows), rounded(w).t())) < 1e-5);
}

TEST_CASE("bf16 products are deterministic: the same bits on every call") {
  SKIP_WITHOUT_BF16();
  Generator g(11);
  const Tensor x = randn({768, 128}, g), w = randn({512, 128}, g), gy = randn({768, 512}, g);
  PrecisionScope scope(Precision::bf16);
  const Tensor a = linear_weight_grad(gy, x), b = linear_weight_grad(gy, x);
  CHECK(max_rel_err(a, b.to(DType::f64)) == 0);
}

TEST_CASE("oneDNN describes itself") {
  CHECK(!onednn_version().empty());
  CHECK(onednn_isa() != "");
}

TEST_CASE(
    "linear_act in bf16 rounds its output and its input gradient in the pass that writes them") {
  SKIP_WITHOUT_BF16();
  const int before = get_num_threads();
  set_num_threads(2);
  Generator g(12);
  const Tensor x = randn({300, 70}, g), w = randn({200, 70}, g), b = randn({200}, g);
  const Tensor w2 = randn({30, 200}, g), gy = randn({300, 200}, g);
  for (const LinearAct act : {LinearAct::relu, LinearAct::gelu}) {
    PrecisionScope scope(Precision::bf16);
    const LinearActResult f = linear_act_forward(x, w, b, act);
    const uint64_t r0 = detail::bf16_activation_roundings();
    // the next layer reads y: the copy the epilogue wrote, no rounding of its own
    const Tensor z = linear_forward(f.y, w2, Tensor());
    CHECK(detail::bf16_activation_roundings() == r0);
    // float32 sums over k = 200 against float64 ones; a copy that was not y's rounding would
    // be off by about 2^-9 of each term
    CHECK(max_rel_err(z, matmul(rounded(f.y), rounded(w2).t())) < 1e-4);
    // the backward's dL/dpre: rounded in its pass, read by dx and dW without rounding again
    const Tensor d = linear_act_backward(gy, f, act);
    const Tensor dx = linear_input_grad(d, w), dw = linear_weight_grad(d, x);
    CHECK(detail::bf16_activation_roundings() == r0);
    CHECK(max_rel_err(dx, matmul(rounded(d), rounded(w))) < 1e-5);
    CHECK(max_rel_err(dw, matmul(rounded(d).t(), rounded(x))) < 1e-5);
  }
  set_num_threads(before);
}
