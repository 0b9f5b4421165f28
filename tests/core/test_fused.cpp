// Fused kernels (core/fused.hpp) against the plain ops they replace.
#include <cmath>

#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/storage.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using qkv::testing::rope_tables;
using testing::same_bits;

namespace {

// (n, n) bool, true where key j <= query i.
Tensor causal(int64_t n) { return le(arange(n).unsqueeze(0), arange(n).unsqueeze(1)); }

// The composed reference: softmax(q k^T * scale, masked to -inf) v, and its backward through
// softmax_backward, all materialising (..., n, m).
struct Ref {
  Tensor out, dq, dk, dv;
};
Ref reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale,
              const Tensor& dout) {
  Tensor s = mul(matmul(q, k.transpose(-2, -1)), scale);
  if (mask.defined()) s = masked_fill(s, logical_not(mask), -INFINITY);
  const Tensor p = softmax(s, -1);
  Ref r;
  r.out = matmul(p, v);
  r.dv = matmul(p.transpose(-2, -1), dout);
  const Tensor dp = matmul(dout, v.transpose(-2, -1));
  Tensor ds = softmax_backward(p, dp, -1);
  if (mask.defined()) ds = masked_fill(ds, logical_not(mask), 0.0);
  ds = mul(ds, scale);
  r.dq = matmul(ds, k);
  r.dk = matmul(ds.transpose(-2, -1), q);
  return r;
}

void check_against_reference(int64_t B, int64_t H, int64_t n, int64_t m, int64_t dk, int64_t dv,
                             const Tensor& mask, DType dt, double tol, uint64_t seed) {
  Generator g(seed);
  const Tensor q = randn({B, H, n, dk}, g, dt), k = randn({B, H, m, dk}, g, dt);
  const Tensor v = randn({B, H, m, dv}, g, dt), dout = randn({B, H, n, dv}, g, dt);
  const double scale = 1.0 / std::sqrt(double(dk));
  const Ref r = reference(q, k, v, mask, scale, dout);
  const AttentionResult f = attention_forward(q, k, v, mask, scale);
  const AttentionGrads d = attention_backward(q, k, v, mask, scale, f.out, f.lse, dout);
  INFO("B " << B << " H " << H << " n " << n << " m " << m << " dk " << dk << " dv " << dv);
  CHECK(f.out.shape() == Shape{B, H, n, dv});
  CHECK(max_abs_diff(f.out, r.out) < tol);
  CHECK(max_abs_diff(d.dq, r.dq) < tol);
  CHECK(max_abs_diff(d.dk, r.dk) < tol);
  CHECK(max_abs_diff(d.dv, r.dv) < tol);
  CHECK(all_finite(d.dq));
}

}  // namespace

TEST_CASE("fused attention equals the composed ops in float32, one tile and many") {
  // Sizes cross the query tile (64) and both key tiles (256 forward, 128 backward).
  check_against_reference(2, 3, 5, 7, 4, 6, Tensor(), DType::f32, 2e-5, 1);
  check_against_reference(1, 2, 150, 300, 16, 8, Tensor(), DType::f32, 2e-5, 2);
  check_against_reference(2, 2, 70, 70, 8, 8, causal(70), DType::f32, 2e-5, 3);
  check_against_reference(1, 1, 33, 520, 8, 4, Tensor(), DType::f64, 1e-12, 4);
}

TEST_CASE("fused attention with padding masks, causal masks and fully masked rows") {
  // Key padding (B, 1, 1, m): batch 1 attends to nothing at all.
  Tensor valid = ones({2, 1, 1, 9}, DType::b8);
  valid.select(0, 1).zero_();
  valid.select(0, 0).narrow(-1, 6, 3).zero_();
  check_against_reference(2, 2, 4, 9, 4, 4, valid, DType::f32, 2e-5, 5);

  Generator g(6);
  const Tensor q = randn({2, 2, 4, 4}, g), k = randn({2, 2, 9, 4}, g), v = randn({2, 2, 9, 4}, g);
  const AttentionResult f = attention_forward(q, k, v, valid, 0.5);
  const AttentionGrads d =
      attention_backward(q, k, v, valid, 0.5, f.out, f.lse, ones({2, 2, 4, 4}));
  // The fully masked batch entry: zero output, zero (finite) gradients everywhere.
  CHECK(max_abs_diff(f.out.select(0, 1), zeros({2, 4, 4})) == 0);
  CHECK(max_abs_diff(d.dq.select(0, 1), zeros({2, 4, 4})) == 0);
  CHECK(max_abs_diff(d.dk.select(0, 1), zeros({2, 9, 4})) == 0);
  CHECK(max_abs_diff(d.dv.select(0, 1), zeros({2, 9, 4})) == 0);
  // Masked keys of the live entry get no gradient.
  CHECK(max_abs_diff(d.dk.select(0, 0).narrow(-2, 6, 3), zeros({2, 3, 4})) == 0);
  CHECK(std::isinf(f.lse.at({1, 0, 0})));
}

TEST_CASE("fused attention: masked keys at both ends of a row, contiguous or strided mask") {
  // Only the span between a row's first and last unmasked key gets the exp (the rest is 0);
  // a contiguous mask row takes a vectorized select, a strided one the general loop. Rows
  // cross the query tile and the keys both key tiles; keys are masked at the start, the end
  // and inside the span.
  const int64_t n = 70, m = 300;
  std::vector<uint8_t> keep;  // (keys, queries): its transpose is strided
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < n; ++i)
      keep.push_back(j >= i % 3 * 40 && j < m - i % 4 * 70 && j % 5 != 2);
  const Tensor strided = from_vector(keep, {m, n}).t(), contiguous = strided.contiguous();
  REQUIRE(strided.stride(1) != 1);
  check_against_reference(2, 2, n, m, 8, 8, contiguous, DType::f32, 2e-5, 11);
  Generator g(12);
  const Tensor q = randn({2, 2, n, 8}, g), k = randn({2, 2, m, 8}, g), v = randn({2, 2, m, 8}, g);
  const Tensor dout = randn({2, 2, n, 8}, g);
  const AttentionResult a = attention_forward(q, k, v, contiguous, 0.35);
  const AttentionResult b = attention_forward(q, k, v, strided, 0.35);
  CHECK(max_abs_diff(a.out, b.out) == 0);
  CHECK(max_abs_diff(a.lse, b.lse) == 0);
  const AttentionGrads da = attention_backward(q, k, v, contiguous, 0.35, a.out, a.lse, dout);
  const AttentionGrads db = attention_backward(q, k, v, strided, 0.35, b.out, b.lse, dout);
  CHECK(max_abs_diff(da.dq, db.dq) == 0);
  CHECK(max_abs_diff(da.dk, db.dk) == 0);
  CHECK(max_abs_diff(da.dv, db.dv) == 0);
}

TEST_CASE("fused attention reads transposed head views and batch shapes of any rank") {
  Generator g(7);
  // (B, n, H, d) projections viewed as (B, H, n, d), as MultiHeadAttention splits heads.
  const Tensor qp = randn({2, 6, 3, 4}, g), kp = randn({2, 5, 3, 4}, g),
               vp = randn({2, 5, 3, 4}, g);
  const Tensor q = qp.transpose(1, 2), k = kp.transpose(1, 2), v = vp.transpose(1, 2);
  const AttentionResult a = attention_forward(q, k, v, Tensor(), 0.3);
  const AttentionResult b =
      attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), Tensor(), 0.3);
  CHECK(max_abs_diff(a.out, b.out) == 0);
  // Merging heads back is a view: the output is stored (B, n, H, d).
  CHECK(a.out.transpose(1, 2).is_contiguous());
  // 3-d inputs (one batch dim).
  const Tensor q3 = randn({4, 6, 4}, g), k3 = randn({4, 5, 4}, g), v3 = randn({4, 5, 2}, g);
  const Ref r = reference(q3, k3, v3, Tensor(), 0.3, ones({4, 6, 2}));
  CHECK(max_abs_diff(attention_forward(q3, k3, v3, Tensor(), 0.3).out, r.out) < 1e-5);
}

TEST_CASE("fused attention never allocates the n x m matrix") {
  Generator g(11);
  const int64_t n = 2048, d = 32;
  const Tensor q = randn({1, 2, n, d}, g), k = randn({1, 2, n, d}, g), v = randn({1, 2, n, d}, g);
  const Tensor dout = randn({1, 2, n, d}, g);
  allocator_reset_peak();
  const size_t before = allocator_stats().live_bytes;
  const AttentionResult f = attention_forward(q, k, v, causal(n), 0.2);
  const AttentionGrads dg = attention_backward(q, k, v, causal(n), 0.2, f.out, f.lse, dout);
  const size_t used = allocator_stats().peak_live_bytes - before;
  // Outputs and gradients are 4 x (2, n, d) plus lse and the (n, n) bool mask (4 MiB); one
  // float (2, n, n) matrix alone would be 32 MiB.
  CHECK(used < size_t(8) << 20);
  CHECK(all_finite(dg.dq));
}

TEST_CASE("fused attention is deterministic and rejects bad shapes") {
  Generator g(8);
  const Tensor q = randn({1, 8, 200, 16}, g), k = randn({1, 8, 200, 16}, g);
  const Tensor v = randn({1, 8, 200, 16}, g), dout = randn({1, 8, 200, 16}, g);
  const AttentionResult a = attention_forward(q, k, v, causal(200), 0.25);
  const AttentionResult b = attention_forward(q, k, v, causal(200), 0.25);
  CHECK(max_abs_diff(a.out, b.out) == 0);
  const AttentionGrads da = attention_backward(q, k, v, causal(200), 0.25, a.out, a.lse, dout);
  const AttentionGrads db = attention_backward(q, k, v, causal(200), 0.25, b.out, b.lse, dout);
  CHECK(max_abs_diff(da.dk, db.dk) == 0);
  CHECK(max_abs_diff(da.dq, db.dq) == 0);

  CHECK_THROWS_WITH(attention_forward(q, randn({1, 8, 200, 15}, g), v, Tensor(), 1.0),
                    Catch::Contains("attention") && Catch::Contains("do not fit"));
  CHECK_THROWS_WITH(attention_forward(q, k, v, ones({3, 200}, DType::b8), 1.0),
                    Catch::Contains("attention") && Catch::Contains("broadcast"));
  CHECK_THROWS_WITH(attention_forward(q, k, v, ones({200, 200}), 1.0),
                    Catch::Contains("must be bool"));
}

TEST_CASE("linear_forward, sum_rows and relu_backward equal the plain ops") {
  Generator g(9);
  const Tensor x = randn({37, 19}, g), w = randn({23, 19}, g), b = randn({23}, g);
  CHECK(max_abs_diff(linear_forward(x, w, b), add(matmul(x, w.t()), b)) < 1e-5);
  CHECK(max_abs_diff(linear_forward(x, w, Tensor()), matmul(x, w.t())) == 0);
  const Tensor big = randn({300, 200}, g), other = randn({300, 200}, g);
  // Same per-column order and double accumulation as sum over dim 0: bitwise equal.
  CHECK(max_abs_diff(sum_rows(big), sum(big, {0})) == 0);
  CHECK(max_abs_diff(sum_rows_product(big, other), sum(mul(big, other), {0})) == 0);
  const Tensor y = relu(big);
  CHECK(max_abs_diff(relu_backward(y, other), where(gt(big, 0.0), other, zeros({}))) == 0);
  CHECK_THROWS_WITH(linear_forward(x, randn({23, 18}, g), b), Catch::Contains("linear"));
  CHECK_THROWS_WITH(sum_rows(randn({3}, g)), Catch::Contains("sum_rows"));
}

TEST_CASE("gelu_forward and gelu_backward give the bits of gelu and g * gelu_grad") {
  Generator g(11);
  for (DType dt : {DType::f32, DType::f64}) {
    // 77 x 301: an odd length, split across threads; the transpose takes the strided path.
    const Tensor x = mul(randn({77, 301}, g, dt), 3.0), dy = randn({301, 77}, g, dt).t();
    for (const Tensor& in : {x, x.t().contiguous().t()}) {
      const GeluResult f = gelu_forward(in);
      INFO(dtype_name(dt));
      CHECK(max_abs_diff(f.y, gelu(in)) == 0);
      CHECK(max_abs_diff(f.cdf, div(gelu(in), in)) < (dt == DType::f32 ? 1e-6 : 1e-14));
      CHECK(max_abs_diff(gelu_backward(dy, in, f.cdf), mul(dy, gelu_grad(in))) == 0);
    }
  }
  const Tensor x = randn({4, 5}, g);
  CHECK_THROWS_WITH(gelu_backward(randn({5, 4}, g), x, gelu_forward(x).cdf),
                    Catch::Contains("gelu_backward") && Catch::Contains("(5, 4)"));
  CHECK_THROWS_WITH(gelu_forward(ones({3}, DType::i64)), Catch::Contains("gelu_forward"));
}

TEST_CASE("index_select and index_add on rows equal the per-slice path") {
  Generator g(10);
  const Tensor table = randn({11, 7}, g);
  const Tensor idx = from_vector<int64_t>({3, 0, 3, 10, 5}, {5});
  const Tensor rows = index_select(table, 0, idx);
  for (int64_t i = 0; i < 5; ++i)
    CHECK(max_abs_diff(rows.select(0, i), table.select(0, static_cast<int64_t>(idx.at({i})))) == 0);
  const Tensor src = randn({5, 7}, g);
  const Tensor acc = index_add(zeros({11, 7}), 0, idx, src);
  // Row 3 receives two rows, added in index order.
  CHECK(max_abs_diff(acc.select(0, 3), add(add(zeros({7}), src.select(0, 0)), src.select(0, 2))) ==
        0);
  CHECK(max_abs_diff(acc.select(0, 1), zeros({7})) == 0);
  // A strided (transposed) table takes the general path with the same values.
  const Tensor tt = table.t().contiguous().t();
  CHECK(max_abs_diff(index_select(tt, 0, idx), rows) == 0);
}

namespace {

// The rotation nn::rotary composed before the fused kernel: x's even and odd slices, four
// products, a difference and a sum, stacked back into pairs.
Tensor composed_rotary(const Tensor& x, const Tensor& c, const Tensor& s) {
  const int64_t d = x.size(-1);
  const Tensor even = x.slice(-1, 0, d, 2), odd = x.slice(-1, 1, d, 2);
  const Tensor re = sub(mul(even, c), mul(odd, s)), ro = add(mul(even, s), mul(odd, c));
  return stack({re, ro}, re.dim()).reshape(x.shape());
}

// Its gradient, term by term as its tape formed it (sub sends -g to mul(odd, s)).
Tensor composed_rotary_grad(const Tensor& g, const Tensor& c, const Tensor& s) {
  const int64_t d = g.size(-1);
  const Tensor ge = g.slice(-1, 0, d, 2), go = g.slice(-1, 1, d, 2);
  const Tensor de = add(mul(go, s), mul(ge, c)), dd = add(mul(go, c), mul(neg(ge), s));
  return stack({de, dd}, de.dim()).reshape(g.shape());
}

}  // namespace

TEST_CASE("rotary_forward gives the bits of the composed rotation, rotary_backward its gradient") {
  Generator g(12);
  for (DType dt : {DType::f32, DType::f64}) {
    // (B, n, h, d) seen as (B, h, n, d) heads: a strided view, as split_heads gives; an odd
    // pair count (d / 2 = 33); 2 x 4 x 67 x 66 = 35376 elements, split across threads.
    for (const Shape& bnhd : {Shape{2, 5, 3, 6}, Shape{2, 67, 4, 66}}) {
      const Tensor heads = mul(randn(bnhd, g, dt), 3.0).transpose(1, 2);
      const int64_t n = heads.size(-2), d = heads.size(-1);
      const auto [c, s] = rope_tables(n, d, 7, dt);
      const Tensor dy = randn(heads.shape(), g, dt);
      INFO(dtype_name(dt) << " " << shape_str(heads.shape()));
      // strided heads, packed, and columns contiguous (each row's elements n apart)
      const Tensor cols = heads.contiguous().transpose(-2, -1).contiguous().transpose(-2, -1);
      for (const Tensor& x : {heads, heads.contiguous(), cols}) {
        const Tensor y = rotary_forward(x, c, s);
        CHECK(y.is_contiguous());
        CHECK(same_bits(y, composed_rotary(x, c, s)));
        CHECK(same_bits(rotary_backward(x, c, s), composed_rotary_grad(x, c, s)));
      }
      // the backward turns back: R(-a) R(a) x = x to rounding
      CHECK(max_abs_diff(rotary_backward(rotary_forward(heads, c, s), c, s), heads) <
            (dt == DType::f32 ? 1e-5 : 1e-13));
      CHECK(same_bits(rotary_backward(dy.transpose(0, 1).contiguous().transpose(0, 1), c, s),
                      rotary_backward(dy, c, s)));
    }
  }
  // a last dim with a stride (every other element), and a 2-d (n, d) input
  const Tensor wide = randn({5, 12}, g), x = wide.slice(-1, 0, 12, 2);
  const auto [c, s] = rope_tables(5, 6, 0, DType::f32);
  CHECK(same_bits(rotary_forward(x, c, s), composed_rotary(x, c, s)));
  CHECK(same_bits(rotary_forward(x, c, s), rotary_forward(x.contiguous(), c, s)));
  CHECK(rotary_forward(empty({0, 5, 6}), c, s).shape() == Shape{0, 5, 6});
}

TEST_CASE("rotary kernels reject odd widths, tables that do not fit and mixed dtypes") {
  Generator g(13);
  const auto [c, s] = rope_tables(4, 6, 0, DType::f32);
  CHECK_THROWS_WITH(rotary_forward(randn({4, 5}, g), c, s), Catch::Contains("rotary") &&
                                                                Catch::Contains("(4, 5)") &&
                                                                Catch::Contains("d even"));
  CHECK_THROWS_WITH(rotary_forward(randn({6}, g), c, s), Catch::Contains("(6)"));
  CHECK_THROWS_WITH(rotary_forward(randn({2, 3, 6}, g), c, s),
                    Catch::Contains("rotary") && Catch::Contains("(4, 3)") &&
                        Catch::Contains("(2, 3, 6)") && Catch::Contains("(3, 3)"));
  CHECK_THROWS_WITH(rotary_backward(randn({4, 8}, g), c, s),
                    Catch::Contains("rotary backward") && Catch::Contains("(4, 8)"));
  CHECK_THROWS_WITH(rotary_forward(randn({4, 6}, g, DType::f64), c, s),
                    Catch::Contains("float64") && Catch::Contains("float32"));
}

TEST_CASE("relu_squared_forward and relu_squared_backward give the bits of relu(x)^2 composed") {
  Generator g(14);
  for (DType dt : {DType::f32, DType::f64}) {
    // 211 x 173 = 36503 elements: an odd length, split across threads; zeros of both signs,
    // a NaN (it passes through relu, as torch) and an infinity.
    Tensor x = mul(randn({211, 173}, g, dt), 2.0);
    x.narrow(0, 0, 1).narrow(1, 0, 4).copy_(
        from_vector<double>({0.0, -0.0, NAN, INFINITY}, {1, 4}).to(dt));
    const Tensor dy = randn({173, 211}, g, dt).t();
    for (const Tensor& in : {x, x.t().contiguous().t()}) {
      INFO(dtype_name(dt));
      const ReluSquaredResult f = relu_squared_forward(in);
      const Tensor r = relu(in);
      CHECK(same_bits(f.r, r));
      CHECK(same_bits(f.y, mul(r, r)));
      // mul(r, r)'s backward gives g r to each factor and the tape sums them, then relu's
      CHECK(
          same_bits(relu_squared_backward(dy, f.r), relu_backward(r, add(mul(dy, r), mul(dy, r)))));
      const ReluSquaredResult y_only = relu_squared_forward(in, false);
      CHECK_FALSE(y_only.r.defined());
      CHECK(same_bits(y_only.y, f.y));
    }
  }
  const Tensor r = relu_squared_forward(randn({4, 5}, g)).r;
  CHECK_THROWS_WITH(relu_squared_backward(randn({5, 4}, g), r),
                    Catch::Contains("relu_squared_backward") && Catch::Contains("(5, 4)") &&
                        Catch::Contains("(4, 5)"));
  CHECK_THROWS_WITH(relu_squared_backward(randn({4, 5}, g, DType::f64), r),
                    Catch::Contains("relu_squared_backward") && Catch::Contains("dtype"));
  CHECK_THROWS_WITH(relu_squared_forward(ones({3}, DType::i64)),
                    Catch::Contains("relu_squared_forward"));
}
