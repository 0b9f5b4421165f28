// Attention variants ([model] attention / window): each fast path equals its dense or
// quadratic formulation (values and gradients, float64 and float32), gradcheck in float64,
// masks behave as for dot product, results repeat bit for bit, and misuse is an error.
#include <catch2/catch.hpp>

#include <cstring>

#include "autograd/gradcheck.hpp"
#include "core/attention_variants.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

// Output and gradients (w.r.t. q, k, v, for the upstream gradient go) of f.
struct Eval {
  Tensor out;
  std::vector<Tensor> grads;
};
template <class F>
Eval run(F&& f, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& go) {
  const Var vq(q, true), vk(k, true), vv(v, true);
  const Var y = f(vq, vk, vv);
  return {y.data(), ag::grad({y}, {go}, {vq, vk, vv})};
}

void check_close(const Eval& a, const Eval& b, double tol) {
  INFO("output");
  CHECK(rel_err(a.out, b.out) < tol);
  for (size_t i = 0; i < a.grads.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(rel_err(a.grads[i], b.grads[i]) < tol);
    CHECK(all_finite(a.grads[i]));
  }
}

void gradcheck_ok(const ag::GradcheckFn& f, const std::vector<Var>& in) {
  const ScopedThreads one(1);
  const ag::GradcheckReport r = ag::gradcheck(f, in);
  INFO(r.summary());
  CHECK(r.passed);
}

}  // namespace

TEST_CASE("window_mask is the band |j - (i + m - n)| <= w") {
  const Tensor m = window_mask(5, 5, 1);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j) CHECK((m.at({i, j}) != 0) == (std::abs(i - j) <= 1));
  // one query against 6 keys is the last position: it sees keys 4 and 5 with w = 1
  const Tensor last = window_mask(1, 6, 1);
  CHECK(to_vector<uint8_t>(last) == std::vector<uint8_t>{0, 0, 0, 0, 1, 1});
}

TEST_CASE("sliding-window kernel equals dense attention with the banded mask") {
  Generator g(3);
  struct Case {
    int64_t B, H, n, m, d, w;
    bool causal, padded;
  };
  // n > 64 crosses query tiles; w = 0 (only the diagonal) and w >= n (full) are the edges;
  // n != m is incremental decoding's alignment.
  for (const Case c :
       {Case{2, 3, 150, 150, 8, 5, false, true}, Case{2, 3, 150, 150, 8, 5, true, true},
        Case{1, 2, 70, 70, 4, 0, false, false}, Case{1, 2, 70, 70, 4, 200, true, true},
        Case{2, 2, 1, 9, 4, 3, false, true}, Case{2, 1, 3, 9, 4, 2, true, false},
        Case{1, 1, 130, 130, 16, 64, false, false}}) {
    for (DType dt : {DType::f64, DType::f32}) {
      INFO("n " << c.n << " m " << c.m << " w " << c.w << " causal " << c.causal << " padded "
                << c.padded << " " << dtype_name(dt));
      const Tensor q = randn({c.B, c.H, c.n, c.d}, g).to(dt),
                   k = randn({c.B, c.H, c.m, c.d}, g).to(dt);
      const Tensor v = randn({c.B, c.H, c.m, c.d + 1}, g).to(dt);
      const Tensor go = randn({c.B, c.H, c.n, c.d + 1}, g).to(dt);
      Tensor mask;
      if (c.padded) {
        Tensor valid = ones({c.B, c.m}, DType::b8);
        valid.select(0, c.B - 1).narrow(0, c.m - c.m / 3, c.m / 3).zero_();
        mask = key_padding_mask(valid);
      }
      Tensor dense_mask = combine_masks(window_mask(c.n, c.m, c.w), mask);
      if (c.causal) dense_mask = combine_masks(dense_mask, causal_mask(c.n, c.m));
      const double s = 0.4;
      const Eval fast =
          run([&](const Var& a, const Var& b,
                  const Var& e) { return ag::local_attention(a, b, e, mask, s, c.w, c.causal); },
              q, k, v, go);
      const Eval dense = run(
          [&](const Var& a, const Var& b, const Var& e) {
            Var w;  // asking for the weights forces the reference path (no fused kernel)
            return scaled_dot_product_attention(a, b, e, dense_mask, s, &w);
          },
          q, k, v, go);
      check_close(fast, dense, dt == DType::f64 ? 1e-12 : 2e-5);
    }
  }
}

TEST_CASE("sliding-window attention: rows with no key are zero, misuse throws") {
  Generator g(4);
  const Tensor q = randn({1, 1, 6, 4}, g, DType::f64), k = randn({1, 1, 6, 4}, g, DType::f64);
  const Tensor v = randn({1, 1, 6, 4}, g, DType::f64);
  Tensor valid = ones({1, 6}, DType::b8);
  valid.narrow(1, 0, 3)
      .zero_();  // the first 3 keys are padding: with w = 1, queries 0, 1 see nothing
  const Var vq(q, true);
  const Var y = ag::local_attention(vq, Var(k), Var(v), key_padding_mask(valid), 0.5, 1, false);
  CHECK(max(abs(y.data().narrow(2, 0, 2))).item() == 0);
  CHECK(max(abs(y.data().narrow(2, 2, 4))).item() > 0);
  const Tensor dq = ag::grad({y}, {ones_like(y.data())}, {vq})[0];
  CHECK(all_finite(dq));
  CHECK(max(abs(dq.narrow(2, 0, 2))).item() == 0);
  CHECK_THROWS_WITH(local_attention_forward(q, k, v, Tensor(), 1.0, -1, false),
                    Catch::Contains("window"));
  CHECK_THROWS_WITH(local_attention_forward(q, k.narrow(3, 0, 3), v, Tensor(), 1.0, 1, false),
                    Catch::Contains("(1, 1, 6, 3)"));
  CHECK_THROWS_WITH(local_attention_forward(q, k, v, ones({6, 5}, DType::b8), 1.0, 1, false),
                    Catch::Contains("(6, 5)"));
}

TEST_CASE("sliding-window attention: gradcheck in float64, bidirectional and causal") {
  Generator g(5);
  Tensor valid = ones({2, 7}, DType::b8);
  valid.select(0, 1).narrow(0, 5, 2).zero_();
  const Tensor mask = key_padding_mask(valid);
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    gradcheck_ok(
        [&](const std::vector<Var>& in) {
          return ag::local_attention(in[0], in[1], in[2], mask, 0.7, 2, causal);
        },
        {leaf({2, 2, 7, 3}, g), leaf({2, 2, 7, 3}, g), leaf({2, 2, 7, 2}, g)});
  }
}

TEST_CASE("sliding-window and linear kernels repeat bit for bit, whatever the thread count") {
  Generator g(6);
  const Tensor q = randn({2, 4, 300, 16}, g), k = randn({2, 4, 300, 16}, g),
               v = randn({2, 4, 300, 16}, g);
  const Tensor go = randn({2, 4, 300, 16}, g);
  auto both = [&](int threads) {
    const ScopedThreads t(threads);
    std::vector<Tensor> r;
    for (bool causal : {false, true}) {
      Eval e = run(
          [&](const Var& a, const Var& b, const Var& c) {
            return ag::local_attention(a, b, c, Tensor(), 0.25, 32, causal);
          },
          q, k, v, go);
      r.push_back(e.out);
      r.insert(r.end(), e.grads.begin(), e.grads.end());
      e = run(
          [&](const Var& a, const Var& b, const Var& c) {
            return linear_attention(a, b, c, causal ? causal_mask(300) : Tensor());
          },
          q, k, v, go);
      r.push_back(e.out);
      r.insert(r.end(), e.grads.begin(), e.grads.end());
    }
    return r;
  };
  const auto a = both(2), b = both(2), c = both(1);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << i);
    CHECK(same_bits(a[i], b[i]));
    CHECK(same_bits(a[i], c[i]));
  }
}

TEST_CASE("linear attention equals its quadratic formulation (non-causal and causal, padded)") {
  Generator g(7);
  for (DType dt : {DType::f64, DType::f32}) {
    for (bool causal : {false, true}) {
      for (const auto& [n, m] : {std::pair<int64_t, int64_t>{9, 9}, {1, 6}, {4, 6}}) {
        if (!causal && n != m) continue;
        INFO(dtype_name(dt) << " causal " << causal << " n " << n << " m " << m);
        const Tensor q = randn({3, 2, n, 4}, g).to(dt), k = randn({3, 2, m, 4}, g).to(dt);
        const Tensor v = randn({3, 2, m, 5}, g).to(dt), go = randn({3, 2, n, 5}, g).to(dt);
        Tensor valid = ones({3, m}, DType::b8);
        valid.select(0, 1).narrow(0, m - 2, 2).zero_();
        valid.select(0, 2).zero_();  // nothing to attend to: zero rows
        Tensor mask = key_padding_mask(valid);
        if (causal) mask = combine_masks(causal_mask(n, m), mask);
        const Eval fast = run([&](const Var& a, const Var& b,
                                  const Var& c) { return linear_attention(a, b, c, mask); },
                              q, k, v, go);
        const Eval quad =
            run([&](const Var& a, const Var& b,
                    const Var& c) { return linear_attention_quadratic(a, b, c, mask); },
                q, k, v, go);
        check_close(fast, quad, dt == DType::f64 ? 1e-12 : 1e-5);
        CHECK(max(abs(fast.out.select(0, 2))).item() == 0);
      }
    }
  }
}

TEST_CASE("linear attention: the quadratic form's weights are phi(q).phi(k) normalised") {
  Generator g(8);
  const Tensor q = randn({1, 1, 3, 2}, g, DType::f64), k = randn({1, 1, 3, 2}, g, DType::f64);
  const Tensor v = randn({1, 1, 3, 2}, g, DType::f64);
  auto phi = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
  Var w;
  (void)linear_attention_quadratic(Var(q), Var(k), Var(v), causal_mask(3), &w);
  for (int64_t i = 0; i < 3; ++i) {
    double a[3], z = 0;
    for (int64_t j = 0; j < 3; ++j) {
      a[j] = 0;
      for (int64_t c = 0; c < 2; ++c) a[j] += phi(q.at({0, 0, i, c})) * phi(k.at({0, 0, j, c}));
      if (j > i) a[j] = 0;
      z += a[j];
    }
    for (int64_t j = 0; j < 3; ++j)
      CHECK(w.data().at({0, 0, i, j}) == Approx(a[j] / z).epsilon(1e-12));
  }
}

TEST_CASE(
    "linear attention: gradcheck in float64 with padding and causal masks, other masks throw") {
  Generator g(9);
  Tensor valid = ones({2, 6}, DType::b8);
  valid.select(0, 0).narrow(0, 4, 2).zero_();
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    Tensor mask = key_padding_mask(valid);
    if (causal) mask = combine_masks(causal_mask(6), mask);
    gradcheck_ok(
        [&](const std::vector<Var>& in) { return linear_attention(in[0], in[1], in[2], mask); },
        {leaf({2, 2, 6, 3}, g), leaf({2, 2, 6, 3}, g), leaf({2, 2, 6, 2}, g)});
  }
  const Var x(randn({1, 1, 6, 3}, g));
  CHECK_THROWS_WITH(linear_attention(x, x, x, window_mask(6, 6, 1)),
                    Catch::Contains("linear_attention") && Catch::Contains("(6, 6)"));
}

TEST_CASE("additive attention: score = w . tanh(q + k), masks as for dot product") {
  Generator g(10);
  const Tensor q = randn({1, 2, 3, 4}, g, DType::f64), k = randn({1, 2, 5, 4}, g, DType::f64);
  const Tensor v = randn({1, 2, 5, 3}, g, DType::f64), w = randn({2, 4}, g, DType::f64);
  Tensor valid = ones({1, 5}, DType::b8);
  valid.narrow(1, 3, 2).zero_();
  Var a;
  const Var out = additive_attention(Var(q), Var(k), Var(v), Var(w), key_padding_mask(valid), &a);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 3; ++i) {
      double s[3], mx = -1e300, z = 0;
      for (int64_t j = 0; j < 3; ++j) {
        s[j] = 0;
        for (int64_t c = 0; c < 4; ++c)
          s[j] += w.at({h, c}) * std::tanh(q.at({0, h, i, c}) + k.at({0, h, j, c}));
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) z += (x = std::exp(x - mx));
      for (int64_t j = 0; j < 3; ++j)
        CHECK(a.data().at({0, h, i, j}) == Approx(s[j] / z).epsilon(1e-12));
      CHECK(a.data().at({0, h, i, 3}) == 0);
      CHECK(a.data().at({0, h, i, 4}) == 0);
    }
  CHECK(max_abs_diff(out.data(), matmul(a.data(), v)) < 1e-14);
}

TEST_CASE("MultiHeadAttention with each scorer: gradcheck in float64 with parameters") {
  Generator g(11);
  struct Kind {
    AttentionKind kind;
    int64_t window;
  };
  Tensor valid = ones({2, 5}, DType::b8);
  valid.select(0, 1).narrow(0, 3, 2).zero_();
  std::vector<Kind> kinds{{AttentionKind::dot, 1}};  // and every scorer of the registry
  for (const auto& a : qkv::nn::kAttentionNames) kinds.push_back({a.value, 0});
  for (const Kind k : kinds) {
    for (bool causal : {false, true}) {
      INFO(attention_kind_name(k.kind) << " window " << k.window << " causal " << causal);
      MultiHeadAttention mha(6, 2, g, true, std::nullopt, 0.0, nullptr, k.kind, k.window);
      mha.to(DType::f64);
      if (k.kind == AttentionKind::additive) {
        REQUIRE(mha.scorer_params.size() == 1);
        CHECK(mha.scorer_params[0].shape() == Shape{2, 3});
        CHECK(mha.named_parameters().front().first == "additive_v");  // own before children
      }
      Tensor mask = key_padding_mask(valid);
      if (causal) mask = combine_masks(causal_mask(5), mask);
      std::vector<Var> in{leaf({2, 5, 6}, g)};
      for (const auto& [name, p] : mha.named_parameters()) {
        Var v = p;
        v.set_name(name);
        in.push_back(v);
      }
      gradcheck_ok([&](const std::vector<Var>& x) { return mha.forward(x[0], x[0], x[0], mask); },
                   in);
    }
  }
}

// Every line of QKV_ATTENTIONS (nn/kinds.hpp), a new one included: the weights it hands out
// are a distribution over the keys the mask allows, the output is the same with or without
// asking for them (fast path against weights path), and the capabilities it claims are the
// ones the config rules let through.
TEST_CASE("every registered scorer: weights rows sum to 1 on allowed keys, capabilities hold") {
  Tensor valid = ones({2, 5}, DType::b8);
  valid.select(0, 1).narrow(0, 3, 2).zero_();
  for (const auto& a : qkv::nn::kAttentionNames) {
    const AttentionTraits can = traits_of(a.value);
    for (bool causal : {false, true}) {
      INFO(a.name << " causal " << causal);
      Generator g(21);
      MultiHeadAttention mha(8, 2, g, true, std::nullopt, 0.0, nullptr, a.value, 0);
      mha.to(DType::f64);
      mha.eval();
      Tensor mask = key_padding_mask(valid);
      if (causal) mask = combine_masks(causal_mask(5), mask);
      const Var x = leaf({2, 5, 8}, g);
      // the weights path: the output formed as pattern @ v
      const auto [with_var, w] = forward_with_weights(mha, x, x, x, mask, true);
      const Tensor with = with_var.data();
      const Tensor without = mha.forward(x, x, x, mask).data();
      CHECK(rel_err(with, without) < 1e-12);
      REQUIRE(w.shape() == Shape{2, 2, 5, 5});
      CHECK(max_abs_diff(sum(w.data(), {3}), ones({2, 2, 5}, DType::f64)) < 1e-12);
      const Tensor outside = mul(w.data(), logical_not(mask.expand({2, 2, 5, 5})).to(DType::f64));
      CHECK(max(abs(outside)).item() == 0);
    }
    const auto window = attention_conflict(a.value, PositionKind::none, 2, 0, 4);
    CHECK(window.has_value() == !can.takes_window);
    if (window)
      CHECK(window->why == "sliding windows need attention = \"dot\", got attention = \"" +
                               std::string(a.name) + "\"");
    CHECK(attention_conflict(a.value, PositionKind::relative, 0, 0, 4).has_value() ==
          !can.takes_bias);
    CHECK(attention_conflict(a.value, PositionKind::none, 0, 0.1, 4).has_value() ==
          !can.drops_weights);
    CHECK(attention_conflict(a.value, PositionKind::none, 0, 0, 4, 0.5).has_value() ==
          !can.takes_scale);
    CHECK_FALSE(attention_conflict(a.value, PositionKind::none, 0, 0, 4, AttentionScale()));
  }
}

TEST_CASE("ModelConfig: attention and window are validated, errors name the key") {
  ModelConfig c = tiny_config(false);
  CHECK_THROWS_WITH(qkv::parse_name<AttentionKind>("no_such_scorer", "model.attention"),
                    Catch::StartsWith("model.attention:") && Catch::Contains("no_such_scorer"));
  c.attention = qkv::nn::AttentionKind::additive;
  c.window = 3;
  CHECK_THROWS_WITH(c.validate(),
                    Catch::StartsWith("model.window:") && Catch::Contains("additive"));
  c.attention = qkv::nn::AttentionKind::dot;
  c.window = -1;
  CHECK_THROWS_WITH(c.validate(), Catch::StartsWith("model.window:"));
  c.window = 0;
  c.attention = qkv::nn::AttentionKind::linear;
  c.attention_dropout = 0.1;
  CHECK_THROWS_WITH(c.validate(), Catch::StartsWith("model.attention_dropout:"));
  c.attention_dropout = 0;
  CHECK_NOTHROW(c.validate());
  Generator g(1);
  CHECK_THROWS_WITH(
      MultiHeadAttention(8, 2, g, true, std::nullopt, 0.0, nullptr, AttentionKind::linear, 2),
      Catch::Contains("window"));
}

TEST_CASE("Seq2Seq with each variant: window reaches self-attention only") {
  Generator g(12);
  ModelConfig c = tiny_config(false);
  c.window = 2;
  Seq2Seq m(c, g);
  CHECK(m.encoder->layers[0]->self_attn->window == 2);
  CHECK(m.decoder->layers[0]->self_attn->window == 2);
  CHECK(m.decoder->layers[0]->cross_attn->window == 0);
  c.window = 0;
  c.attention = qkv::nn::AttentionKind::additive;
  Seq2Seq a(c, g);
  CHECK(a.decoder->layers[1]->cross_attn->kind == AttentionKind::additive);
  CHECK(a.parameter_count() == Seq2Seq(
                                   [&] {
                                     ModelConfig d = c;
                                     d.attention = qkv::nn::AttentionKind::dot;
                                     return d;
                                   }(),
                                   g)
                                       .parameter_count() +
                                   5 * 2 * 4);  // 5 attention layers x (h, d_head)
}
