// The lesson's claims about attention, measured on the library's own modules.
#include <catch2/catch.hpp>

#include <cmath>

#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

// Rows of x (B, n, ...) reordered along dim 1 by perm.
Tensor permute_rows(const Tensor& x, const std::vector<int64_t>& perm) {
  return index_select(x, 1, from_vector<int64_t>(perm, {static_cast<int64_t>(perm.size())}));
}

}  // namespace

TEST_CASE("claim: the worked example through scaled_dot_product_attention") {
  const Var Q(tensor({1, 0, 0, 1, 1, 1}, {3, 2}));
  const Var V(tensor({1, 0, 0, 1, 0.5, 0.5}, {3, 2}));
  Var A;
  const Var O = scaled_dot_product_attention(Q, Q, V, Tensor(), std::nullopt, &A);
  const Tensor A_want =
      tensor({0.401, 0.198, 0.401, 0.198, 0.401, 0.401, 0.248, 0.248, 0.503}, {3, 3});
  const Tensor O_want = tensor({0.602, 0.398, 0.398, 0.602, 0.500, 0.500}, {3, 2});
  INFO("A = " << A.data() << "\nO = " << O.data());
  CHECK(max_abs_diff(A.data(), A_want) < 5e-4);  // agrees to 3 decimals
  CHECK(max_abs_diff(O.data(), O_want) < 5e-4);

  // The scale is an explicit choice: 1/sqrt(d_k) by default, exactly 1 when asked.
  Var A1;
  scaled_dot_product_attention(Q, Q, V, Tensor(), 1.0, &A1);
  const Tensor S1 = matmul(Q.data(), Q.data().t());
  CHECK(max_abs_diff(A1.data(), softmax(S1, -1)) < 1e-7);
  Var A3;
  scaled_dot_product_attention(Q, Q, V, Tensor(), 3.0, &A3);
  CHECK(max_abs_diff(A3.data(), softmax(mul(S1, 3.0), -1)) < 1e-7);
  CHECK(max_abs_diff(A1.data(), A.data()) > 0.05);
}

TEST_CASE("claim: attention handles n != m, d_v != d_k and batch/head dims") {
  Generator g(1);
  const Var q(randn({2, 3, 4, 5}, g, DType::f64)), k(randn({2, 3, 6, 5}, g, DType::f64)),
      v(randn({2, 3, 6, 7}, g, DType::f64));
  Var w;
  const Tensor o = scaled_dot_product_attention(q, k, v, Tensor(), std::nullopt, &w).data();
  REQUIRE(o.shape() == Shape{2, 3, 4, 7});
  REQUIRE(w.shape() == Shape{2, 3, 4, 6});
  // Against a naive loop, one (batch, head) at a time.
  double worst = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < 4; ++i) {
        std::vector<double> s(6);
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j < 6; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < 5; ++c)
            dot += q.data().at({b, h, i, c}) * k.data().at({b, h, j, c});
          s[j] = dot / std::sqrt(5.0);
          mx = std::max(mx, s[j]);
        }
        for (double& x : s) z += (x = std::exp(x - mx));
        for (int64_t c = 0; c < 7; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < 6; ++j) acc += s[j] / z * v.data().at({b, h, j, c});
          worst = std::max(worst, std::abs(acc - o.at({b, h, i, c})));
        }
      }
  CHECK(worst < 1e-12);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, Var(randn({2, 3, 6, 4}, g, DType::f64)), v),
                    Catch::Contains("(2, 3, 4, 5)") && Catch::Contains("(2, 3, 6, 4)"));
  // masks: bool only, and must broadcast to the scores
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, ones({4, 6})), Catch::Contains("bool"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, causal_mask(4, 5)),
                    Catch::Contains("(4, 5)"));
}

TEST_CASE("claim: self-attention is permutation equivariant, positional encoding breaks it") {
  Generator g(2);
  MultiHeadAttention mha(16, 4, g);
  mha.to(DType::f64);
  PositionalEncoding pe(PositionKind::sinusoidal, 16, 0, g, 0.0, nullptr);
  BlockConfig bc;
  bc.d_model = 16, bc.heads = 4, bc.d_ff = 32, bc.dropout = 0;
  TransformerEncoderBlock block(bc, g, nullptr);
  block.to(DType::f64);
  const Tensor X = randn({2, 7, 16}, g, DType::f64);
  auto sa = [&](const Tensor& x) { return mha.forward(Var(x), Var(x), Var(x)).data(); };
  auto sa_pe = [&](const Tensor& x) {
    const Var h = pe.forward(Var(x));
    return mha.forward(h, h, h).data();
  };
  auto enc = [&](const Tensor& x) { return block.forward(Var(x), Tensor()).data(); };
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<int64_t> perm = randperm(7, g);
    if (trial == 0) perm = {6, 5, 4, 3, 2, 1, 0};
    INFO("trial " << trial);
    const Tensor PX = permute_rows(X, perm);
    CHECK(max_abs_diff(sa(PX), permute_rows(sa(X), perm)) < 1e-12);
    CHECK(max_abs_diff(enc(PX), permute_rows(enc(X), perm)) < 1e-12);
    // With positions added, a token's output depends on where it stands.
    CHECK(max_abs_diff(sa_pe(PX), permute_rows(sa_pe(X), perm)) > 1e-2);
  }
}

TEST_CASE("claim: the causal mask hides the future") {
  Generator g(3);
  const int64_t n = 6;
  const Tensor cm = causal_mask(n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) CHECK(cm.at({i, j}) == (j <= i ? 1.0 : 0.0));
  // n queries over m >= n keys: query i sees keys up to i + (m - n) (a cached prefix)
  const Tensor cm2 = causal_mask(2, 5);
  CHECK(to_vector<uint8_t>(cm2) == std::vector<uint8_t>{1, 1, 1, 1, 0, 1, 1, 1, 1, 1});

  MultiHeadAttention mha(12, 3, g);
  mha.to(DType::f64);
  const Tensor X = randn({2, n, 12}, g, DType::f64);
  const auto [y_var, w] = forward_with_weights(mha, Var(X), Var(X), Var(X), cm);
  const Tensor Y = y_var.data();
  REQUIRE(w.shape() == Shape{2, 3, n, n});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < n; ++i) {
        double row = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double a = w.data().at({b, h, i, j});
          row += a;
          if (j > i) CHECK(a == 0.0);  // lower-triangular
        }
        CHECK(w.data().at({b, h, i, i}) > 0.0);  // the diagonal is allowed
        CHECK(row == Approx(1.0).epsilon(1e-12));
      }
  // Changing the tokens after position i leaves outputs 0..i unchanged (and changes later ones).
  for (int64_t i = 0; i + 1 < n; ++i) {
    Tensor X2 = X.clone();
    X2.narrow(1, i + 1, n - i - 1).copy_(randn({2, n - i - 1, 12}, g, DType::f64));
    const Tensor Y2 = mha.forward(Var(X2), Var(X2), Var(X2), cm).data();
    INFO("position " << i);
    CHECK(max_abs_diff(Y2.narrow(1, 0, i + 1), Y.narrow(1, 0, i + 1)) < 1e-14);
    CHECK(max_abs_diff(Y2.narrow(1, i + 1, n - i - 1), Y.narrow(1, i + 1, n - i - 1)) > 1e-3);
  }

  // The same through a whole Seq2Seq decoder: logits at t <= i ignore target tokens after i.
  Generator mg(4);
  Seq2Seq model(tiny_config(false), mg);
  model.to(DType::f64);
  model.eval();
  const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 1, 2, 0, 0}, {2, 5});
  const Tensor sv = valid_mask({5, 3}, 5), tv = valid_mask({6, 6}, 6);
  const Tensor tgt = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0}, {2, 6});
  const Tensor L = model.forward(src, tgt, sv, tv).data();
  for (int64_t i = 0; i + 1 < 6; ++i) {
    Tensor tgt2 = tgt.clone();
    tgt2.narrow(1, i + 1, 5 - i).copy_(randint({2, 5 - i}, 0, 6, g));
    tgt2.select(1, i + 1).copy_(rsub(5.0, tgt.select(1, i + 1).to(DType::f64)).to(DType::i64));
    const Tensor L2 = model.forward(src, tgt2, sv, tv).data();
    INFO("position " << i);
    CHECK(max_abs_diff(L2.narrow(1, 0, i + 1), L.narrow(1, 0, i + 1)) < 1e-12);
    CHECK(max_abs_diff(L2.narrow(1, i + 1, 5 - i), L.narrow(1, i + 1, 5 - i)) > 1e-6);
  }
}

TEST_CASE("claim: the variance lemma, Var(q.k) = d_k, and 1 after scaling") {
  // q, k with unit-variance entries: q.k is a sum of d_k products of variance 1. Its sample
  // variance over N pairs has relative standard error sqrt((2 + 6/d_k) / N) (products of
  // normals have excess kurtosis 6), about 1.4% at N = 10000; we allow 5 standard errors.
  // The scaled score is read back out of scaled_dot_product_attention itself: with a second
  // key equal to zero, the weights are softmax([s, 0]), so s = log(w0 / w1).
  const int64_t N = 10000;
  for (int64_t dk : {16, 64, 256}) {
    Generator g(100 + static_cast<uint64_t>(dk));
    const Tensor q = randn({N, 1, dk}, g, DType::f64);
    const Tensor k1 = randn({N, 1, dk}, g, DType::f64);
    const Tensor k = concat({k1, zeros({N, 1, dk}, DType::f64)}, 1);  // (N, 2, dk)
    const Tensor v = zeros({N, 2, 1}, DType::f64);
    const double tol = 5 * std::sqrt((2.0 + 6.0 / static_cast<double>(dk)) / N);
    auto score_var = [&](AttentionScale s) {
      Var w;
      scaled_dot_product_attention(Var(q), Var(k), Var(v), Tensor(), s, &w);
      const Tensor ww = w.data().squeeze(1);  // (N, 2)
      const Tensor scores = log(div(ww.select(1, 0), ww.select(1, 1)));
      return var(scores).item();
    };
    const double raw = var(sum(mul(q, k1), {1, 2})).item();
    const double through_sdpa_unscaled = score_var(1.0);
    const double scaled = score_var(std::nullopt);
    INFO("d_k " << dk << ": Var(q.k) = " << raw
                << ", unscaled through SDPA = " << through_sdpa_unscaled
                << ", after 1/sqrt(d_k) = " << scaled << ", tolerance " << tol);
    CHECK(std::abs(raw / static_cast<double>(dk) - 1) < tol);
    CHECK(std::abs(through_sdpa_unscaled / raw - 1) < 1e-9);  // the same dot products
    CHECK(std::abs(scaled - 1) < tol);
    CHECK(std::abs(scaled * static_cast<double>(dk) / raw - 1) < 1e-9);  // exactly 1/d_k of it
  }
}

TEST_CASE("claim: sinusoidal PE matches the formula at any length") {
  Generator g(5);
  for (int64_t d : {16, 6}) {
    const int64_t n = 1500;  // longer than any default table
    const Tensor t = sinusoidal_table(n, d, DType::f64);
    double worst = 0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t i = 0; i < d / 2; ++i) {
        const double w = std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d));
        worst = std::max(worst, std::abs(t.at({p, 2 * i}) - std::sin(p * w)));
        worst = std::max(worst, std::abs(t.at({p, 2 * i + 1}) - std::cos(p * w)));
      }
    INFO("d " << d);
    CHECK(worst < 1e-12);
    // offsets pick the same rows; float32 tables are the float64 ones rounded
    CHECK(max_abs_diff(sinusoidal_table(10, d, DType::f64, 1234), t.narrow(0, 1234, 10)) < 1e-12);
    CHECK(max_abs_diff(sinusoidal_table(n, d, DType::f32).to(DType::f64), t) < 1e-7);
    // The module adds exactly these rows, for any offset, with no length limit.
    PositionalEncoding pe(PositionKind::sinusoidal, d, 0, g, 0.0, nullptr);
    const Tensor z = zeros({2, n, d}, DType::f64);
    CHECK(max_abs_diff(pe.forward(Var(z)).data().select(0, 1), t) < 1e-15);
    const Tensor z2 = zeros({1, 7, d}, DType::f64);
    CHECK(max_abs_diff(pe.forward(Var(z2), 1400).data().select(0, 0), t.narrow(0, 1400, 7)) <
          1e-15);
  }
}

TEST_CASE("claim: PE(p + D) is a fixed linear map of PE(p): 2x2 rotations") {
  const int64_t d = 16, n = 1400;
  const Tensor t = sinusoidal_table(n, d, DType::f64);
  auto pe = [&](int64_t p, int64_t c) { return t.at({p, c}); };
  for (int64_t D : {1, 7, 64, 333}) {
    for (int64_t i = 0; i < d / 2; ++i) {
      // Fit the 2x2 map from positions 0 and 1 alone: M [PE(0) PE(1)] = [PE(D) PE(1 + D)].
      const double a = pe(0, 2 * i), b = pe(1, 2 * i), c = pe(0, 2 * i + 1), e = pe(1, 2 * i + 1);
      const double det = a * e - b * c;
      const double inv[2][2] = {{e / det, -b / det}, {-c / det, a / det}};
      const double Y[2][2] = {{pe(D, 2 * i), pe(1 + D, 2 * i)},
                              {pe(D, 2 * i + 1), pe(1 + D, 2 * i + 1)}};
      double M[2][2];
      for (int r = 0; r < 2; ++r)
        for (int s = 0; s < 2; ++s) M[r][s] = Y[r][0] * inv[0][s] + Y[r][1] * inv[1][s];
      // It is the rotation by omega_i D, whatever p it came from...
      const double w =
          std::pow(10000.0, -2.0 * static_cast<double>(i) / d) * static_cast<double>(D);
      INFO("D " << D << " pair " << i);
      CHECK(std::abs(M[0][0] - std::cos(w)) < 1e-8);
      CHECK(std::abs(M[0][1] - std::sin(w)) < 1e-8);
      CHECK(std::abs(M[1][0] + std::sin(w)) < 1e-8);
      CHECK(std::abs(M[1][1] - std::cos(w)) < 1e-8);
      // ...and the same map takes PE(p) to PE(p + D) at every other p.
      for (int64_t p : {2, 5, 40, 517, 1000}) {
        const double s0 = pe(p, 2 * i), c0 = pe(p, 2 * i + 1);
        CHECK(std::abs(M[0][0] * s0 + M[0][1] * c0 - pe(p + D, 2 * i)) < 1e-8);
        CHECK(std::abs(M[1][0] * s0 + M[1][1] * c0 - pe(p + D, 2 * i + 1)) < 1e-8);
      }
    }
  }
}

TEST_CASE("claim: multi-head bookkeeping for d = 512, h = 8") {
  Generator g(6);
  const int64_t d = 512, h = 8, n = 10, m = 7;
  MultiHeadAttention mha(d, h, g);
  CHECK(mha.d_head == 64);
  CHECK(mha.parameter_count() == 4 * d * d + 4 * d);
  CHECK(mha.w_q->weight.shape() == Shape{d, d});
  const Var x(randn({2, n, d}, g)), mem(randn({2, m, d}, g));
  CHECK(mha.split_heads(x).shape() == Shape{2, h, n, 64});
  CHECK(max_abs_diff(mha.merge_heads(mha.split_heads(x)).data(), x.data()) == 0);
  const auto [y, w] = forward_with_weights(mha, x, x, x);
  CHECK(y.shape() == Shape{2, n, d});
  CHECK(w.shape() == Shape{2, h, n, n});
  const auto [yc, wc] = forward_with_weights(mha, x, mem, mem);
  CHECK(yc.shape() == Shape{2, n, d});
  CHECK(wc.shape() == Shape{2, h, n, m});

  // Head j sees only columns [64 j, 64 (j + 1)) of the projections: recompute head by head.
  std::vector<Tensor> heads;
  auto rows = [&](const Var& lin_w, int64_t j) { return lin_w.data().narrow(0, 64 * j, 64); };
  for (int64_t j = 0; j < h; ++j) {
    const Tensor q = add(matmul(x.data(), rows(mha.w_q->weight, j).t()),
                         mha.w_q->bias.data().narrow(0, 64 * j, 64));
    const Tensor k = add(matmul(mem.data(), rows(mha.w_k->weight, j).t()),
                         mha.w_k->bias.data().narrow(0, 64 * j, 64));
    const Tensor v = add(matmul(mem.data(), rows(mha.w_v->weight, j).t()),
                         mha.w_v->bias.data().narrow(0, 64 * j, 64));
    const Tensor a = softmax(mul(matmul(q, k.t()), 1.0 / 8.0), -1);  // 1/sqrt(64)
    CHECK(max_abs_diff(a, wc.data().select(1, j)) < 1e-5);
    heads.push_back(matmul(a, v));
  }
  const Tensor want =
      add(matmul(concat(heads, -1), mha.w_o->weight.data().t()), mha.w_o->bias.data());
  CHECK(rel_err(yc.data(), want) < 1e-5);
  CHECK_THROWS_WITH(MultiHeadAttention(512, 7, g), Catch::Contains("512") && Catch::Contains("7"));
  CHECK_THROWS_WITH(mha.forward(x, Var(randn({2, m, 256}, g)), mem),
                    Catch::Contains("(2, 7, 256)"));
}

TEST_CASE("claim: a fully masked row gives zero output and finite, zero gradients") {
  Generator g(7);
  const Var q = leaf({2, 3, 4}, g), k = leaf({2, 5, 4}, g), v = leaf({2, 5, 3}, g);
  Tensor mask = ones({3, 5}, DType::b8);
  mask.select(0, 1).fill_(0);  // query 1 may attend to nothing
  Var w;
  const Var o = scaled_dot_product_attention(q, k, v, mask, std::nullopt, &w);
  CHECK(all_finite(o.data()));
  CHECK(max(abs(o.data().select(1, 1))).item() == 0);
  CHECK(max(abs(w.data().select(1, 1))).item() == 0);
  CHECK(max(abs(o.data().select(1, 0))).item() > 0);
  const Tensor R = randn(o.shape(), g, DType::f64);
  const auto grads = ag::grad({o}, {R}, {q, k, v});
  for (const Tensor& gr : grads) CHECK(all_finite(gr));
  CHECK(max(abs(grads[0].select(1, 1))).item() == 0);  // the masked query gets no gradient
  CHECK(max(abs(grads[0].select(1, 0))).item() > 0);

  // Through MultiHeadAttention: a sequence whose keys are all padding. Its heads output zero,
  // so the layer outputs W_O's bias; every gradient stays finite.
  MultiHeadAttention mha(8, 2, g);
  mha.to(DType::f64);
  const Var x = leaf({2, 4, 8}, g);
  const Tensor valid = valid_mask({4, 0}, 4);  // the second sequence is all padding
  const Tensor m = combine_masks(causal_mask(4), key_padding_mask(valid));
  CHECK(m.shape() == Shape{2, 1, 4, 4});
  const Var y = mha.forward(x, x, x, m);
  CHECK(all_finite(y.data()));
  for (int64_t i = 0; i < 4; ++i)
    CHECK(max_abs_diff(y.data().select(0, 1).select(0, i), mha.w_o->bias.data()) == 0);
  std::vector<Var> wrt = {x};
  for (const Var& p : mha.parameters()) wrt.push_back(p);
  const auto g2 = ag::grad({y}, {randn(y.shape(), g, DType::f64)}, wrt);
  for (const Tensor& gr : g2) CHECK(all_finite(gr));
  CHECK(max(abs(g2[0].select(0, 1))).item() == 0);  // nothing flows to the padded sequence
}

TEST_CASE("claim: learned positions stop at max_len, sinusoidal ones do not") {
  Generator g(8);
  PositionalEncoding learned(PositionKind::learned, 4, 5, g, 0.0, nullptr);
  CHECK(learned.table.shape() == Shape{5, 4});
  CHECK_NOTHROW(learned.forward(Var(zeros({1, 5, 4}))));
  CHECK(max_abs_diff(learned.forward(Var(zeros({1, 3, 4})), 2).data().select(0, 0),
                     learned.table.data().narrow(0, 2, 3)) == 0);
  CHECK_THROWS_WITH(learned.forward(Var(zeros({1, 6, 4}))),
                    Catch::Contains("6") && Catch::Contains("max_len") && Catch::Contains("5"));
  CHECK_THROWS_AS(learned.forward(Var(zeros({1, 3, 4})), 3), Error);
  CHECK_THROWS_WITH(learned.forward(Var(zeros({1, 3, 5}))), Catch::Contains("(1, 3, 5)"));

  ModelConfig c = tiny_config(false);
  c.position = qkv::nn::PositionKind::learned;
  c.max_len = 4;
  Seq2Seq m(c, g);
  const Tensor ok = zeros({1, 4}, DType::i64), long_ = zeros({1, 5}, DType::i64);
  CHECK_NOTHROW(m.forward(ok, ok, valid_mask({4}, 4), valid_mask({4}, 4)));
  CHECK_THROWS_WITH(m.forward(long_, ok, valid_mask({5}, 5), valid_mask({4}, 4)),
                    Catch::Contains("max_len"));
  // incremental decoding past max_len is the same error
  m.eval();
  auto st = m.start_decoding(m.encode(ok, valid_mask({4}, 4)), valid_mask({4}, 4));
  for (int i = 0; i < 4; ++i) m.decode_step(st, zeros({1}, DType::i64));
  CHECK_THROWS_WITH(m.decode_step(st, zeros({1}, DType::i64)), Catch::Contains("max_len"));

  PositionalEncoding sinus(PositionKind::sinusoidal, 4, 5, g, 0.0, nullptr);
  CHECK(sinus.parameter_count() == 0);
  CHECK_NOTHROW(sinus.forward(Var(zeros({1, 6000, 4}))));
  CHECK_THROWS_WITH(parse_position("rotary"), Catch::Contains("rotary"));
}

TEST_CASE("claim: incremental decode_step gives the full decoder's logits (post-LN and pre-LN)") {
  struct Variant {
    const char* name;
    bool norm_first, final_norm, tie;
    std::string position;
    std::string attention;
    int64_t window;
  };
  // The attention variants too: the cache feeds additive and linear attention (which
  // recomputes from the cached k, v) and the window (a new query sees the last w + 1 keys);
  // rope rotates each new key at its own position, relative bias looks back from the query's.
  for (const Variant& vt :
       {Variant{"post-LN", false, false, false, "sinusoidal", "dot", 0},
        Variant{"pre-LN", true, false, false, "sinusoidal", "dot", 0},
        Variant{"post-LN, final norm, tied, learned", false, true, true, "learned", "dot", 0},
        Variant{"additive", false, false, false, "sinusoidal", "additive", 0},
        Variant{"linear, pre-LN", true, false, false, "sinusoidal", "linear", 0},
        Variant{"window 2", false, false, false, "sinusoidal", "dot", 2},
        Variant{"pre-LN, rope", true, false, false, "rope", "dot", 0},
        Variant{"post-LN, relative", false, false, false, "relative", "dot", 0},
        Variant{"relative, window 2", false, false, false, "relative", "dot", 2},
        Variant{"rope, linear", false, false, false, "rope", "linear", 0}}) {
    INFO(vt.name);
    Generator g(9);
    ModelConfig c = tiny_config(vt.norm_first, vt.final_norm);
    c.tie_output = vt.tie;
    c.position = qkv::parse_name<PositionKind>(vt.position, "position");
    c.attention = qkv::parse_name<AttentionKind>(vt.attention, "attention");
    c.window = vt.window;
    c.max_len = 16;
    c.relative_clip = 3;  // T = 7 > K: clipped offsets too
    Seq2Seq m(c, g);
    m.to(DType::f64);
    // relative bias tables start at zero (position-free): give them values to check
    for (auto& [name, p] : m.named_parameters())
      if (name.find("relative_bias") != std::string::npos)
        p.data().copy_(uniform(p.shape(), -1, 1, g, DType::f64));
    m.eval();
    const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 5, 4, 0, 0}, {2, 5});
    const Tensor sv = valid_mask({5, 3}, 5);
    const int64_t T = 7;
    const Tensor tgt = randint({2, T}, 0, c.tgt_vocab, g);
    const Var memory = m.encode(src, sv);
    const Tensor full = m.decode(memory, sv, tgt, valid_mask({T, T}, T)).data();  // (2, T, V)
    auto st = m.start_decoding(memory, sv);
    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
      Hooks cross;  // each layer's cross-attention weights of this step
      cross.capture = names_matching({"decoder.blocks.*.cross.pattern"});
      Tensor step;
      {
        HookScope scope(cross);
        step = m.decode_step(st, tgt.select(1, t).contiguous()).data();  // (2, V)
      }
      REQUIRE(step.shape() == Shape{2, c.tgt_vocab});
      REQUIRE(cross.cache.size() == 2);
      const Var cw0 = cross.cache.at("decoder.blocks.0.cross.pattern");
      CHECK(cw0.shape() == Shape{2, 2, 1, 5});
      // cross-attention never looks at padded source positions
      CHECK(max(abs(cw0.data().select(0, 1).narrow(2, 3, 2))).item() == 0);
      worst = std::max(worst, rel_err(step, full.select(1, t)));
    }
    CHECK(st.as<Seq2Seq::Cache>().position == T);
    CHECK(st.as<Seq2Seq::Cache>().cache[1].self_k.shape() == Shape{2, 2, T, 4});
    INFO("worst relative difference " << worst);
    CHECK(worst < 1e-12);
  }
}
