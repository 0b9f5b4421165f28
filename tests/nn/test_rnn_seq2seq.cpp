// The recurrent encoder-decoders (nn/rnn_seq2seq.hpp): Bahdanau's alignment model against its
// definition on hand-built cases (scores, weights, context), incremental decoding against the
// teacher-forced pass, the hook points a pass reaches, padding, the float64 gradcheck of the
// registry's entries, and the config rules, one line each.
#include <catch2/catch.hpp>

#include <cmath>

#include "nn/bahdanau_attention.hpp"
#include "nn/rnn_seq2seq.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

void set(Var& p, const std::vector<double>& v) {
  p.data().copy_(from_vector(v, p.shape()).to(p.dtype()));
}

// e_j = v . tanh(W s + U h_j), a = softmax over the real j, c = sum_j a_j h_j, in doubles.
struct Expected {
  std::vector<double> a, c;
};
Expected by_hand(const std::vector<double>& W, const std::vector<double>& U,
                 const std::vector<double>& v, const std::vector<double>& s,
                 const std::vector<std::vector<double>>& h, const std::vector<bool>& real) {
  const size_t n = v.size(), ns = s.size(), dh = h[0].size();
  std::vector<double> e(h.size()), a(h.size(), 0.0), c(dh, 0.0);
  double top = -1e300, z = 0;
  for (size_t j = 0; j < h.size(); ++j) {
    e[j] = 0;
    for (size_t k = 0; k < n; ++k) {
      double x = 0;
      for (size_t l = 0; l < ns; ++l) x += W[k * ns + l] * s[l];
      for (size_t l = 0; l < dh; ++l) x += U[k * dh + l] * h[j][l];
      e[j] += v[k] * std::tanh(x);
    }
    if (real[j]) top = std::max(top, e[j]);
  }
  for (size_t j = 0; j < h.size(); ++j)
    if (real[j]) z += (a[j] = std::exp(e[j] - top));
  for (size_t j = 0; j < h.size(); ++j) {
    a[j] /= z;
    for (size_t l = 0; l < dh; ++l) c[l] += a[j] * h[j][l];
  }
  return {a, c};
}

}  // namespace

TEST_CASE("bahdanau attention: scores, weights and context by their definition") {
  Generator g(1);
  BahdanauAttention m(2, 3, 2, g);
  m.to(DType::f64);
  const std::vector<double> W{0.5, -1.0, 2.0, 0.25}, U{1.0, 0.0, -0.5, 0.3, 2.0, 1.0}, v{1.5, -0.7},
      s{0.4, -0.2};
  const std::vector<std::vector<double>> h{{1, 0, 0}, {0, 1, 0}, {0.5, -0.5, 2}, {-1, 1, 1}};
  set(m.w_a->weight, W);
  set(m.u_a->weight, U);
  set(m.v_a, v);
  std::vector<double> flat;
  for (const auto& r : h) flat.insert(flat.end(), r.begin(), r.end());
  const Var hv(from_vector(flat, {1, 4, 3}));
  const Var sv(from_vector(s, {1, 2}));
  SECTION("every key real") {
    const auto got = m.attend(sv, m.keys(hv), hv, Tensor());
    const Expected want = by_hand(W, U, v, s, h, {true, true, true, true});
    CHECK(max_abs_diff(got.weights.data(), from_vector(want.a, {1, 4})) < 1e-14);
    CHECK(max_abs_diff(got.context.data(), from_vector(want.c, {1, 3})) < 1e-14);
  }
  SECTION("a padded key gets weight 0 and adds nothing to the context") {
    const Tensor mask = key_padding_mask(valid_mask({3}, 4));
    const auto got = m.attend(sv, m.keys(hv), hv, mask);
    const Expected want = by_hand(W, U, v, s, h, {true, true, true, false});
    CHECK(got.weights.data().to(DType::f64).data<double>()[3] == 0.0);
    CHECK(max_abs_diff(got.weights.data(), from_vector(want.a, {1, 4})) < 1e-14);
    CHECK(max_abs_diff(got.context.data(), from_vector(want.c, {1, 3})) < 1e-14);
  }
  SECTION("v_a = 0 scores every key alike: uniform weights, the mean annotation") {
    set(m.v_a, {0, 0});
    const auto got = m.attend(sv, m.keys(hv), hv, Tensor());
    CHECK(max_abs_diff(got.weights.data(), full({1, 4}, 0.25, DType::f64)) < 1e-15);
    CHECK(max_abs_diff(got.context.data(), from_vector<double>({0.125, 0.375, 0.75}, {1, 3})) <
          1e-15);
  }
}

TEST_CASE("rnn seq2seq: decode_step token by token gives the teacher-forced logits") {
  for (bool attend : {true, false}) {
    INFO((attend ? "additive attention" : "fixed context"));
    Generator g(5);
    RecurrentSeq2Seq m(tiny_rnn_config(attend), g);
    m.eval();
    const Tensor src = from_vector<int64_t>({1, 4, 6, 2, 3, 5, 0, 0}, {2, 4});
    const Tensor sv = valid_mask({4, 2}, 4);
    const Tensor tgt = from_vector<int64_t>({1, 2, 3, 4, 1, 5, 4, 2}, {2, 4});
    const Tensor tv = valid_mask({4, 4}, 4);
    const Tensor full_pass = m.forward(src, tgt, sv, tv).data();  // (2, 4, V)
    const Var memory = m.encode(src, sv);
    CHECK(rel_err(m.decode(memory, sv, tgt, tv).data(), full_pass) == 0.0);
    DecodeState st = m.start_decoding(memory, sv);
    for (int64_t t = 0; t < 4; ++t) {
      const Tensor step = m.decode_step(st, tgt.select(1, t).contiguous()).data();  // (2, V)
      CHECK(rel_err(step, full_pass.select(1, t)) < 1e-6);
    }
    // what sits at a padded source position changes nothing
    const Tensor other = from_vector<int64_t>({1, 4, 6, 2, 3, 5, 6, 1}, {2, 4});
    CHECK(same_bits(m.forward(other, tgt, sv, tv).data(), full_pass));
  }
}

TEST_CASE("rnn seq2seq: hook points as a pass reaches them, the cross site with one head") {
  for (bool attend : {true, false}) {
    Generator g(2);
    RecurrentSeq2Seq m(tiny_rnn_config(attend), g);
    m.eval();
    Hooks h;
    h.capture = names_matching({"*"});
    {
      HookScope scope(h);
      m.forward(from_vector<int64_t>({1, 4, 6, 2, 3, 5, 1, 0}, {2, 4}),
                from_vector<int64_t>({1, 2, 3, 1, 5, 4}, {2, 3}), valid_mask({4, 3}, 4),
                valid_mask({3, 3}, 3));
    }
    CHECK(h.passed == hook_points(m));
    CHECK(h.cache.at("decoder.rnn.0.out").shape() == Shape{2, 3, 8});
    CHECK(h.cache.at("decoder.readout").shape() == Shape{2, 3, 4});
    if (!attend) {
      CHECK(m.attention_sites().empty());
      CHECK(h.cache.at("decoder.context").shape() == Shape{2, 8});
      continue;
    }
    const std::vector<AttentionSite> sites = m.attention_sites();
    REQUIRE(sites.size() == 1);
    CHECK(sites[0].name == "cross");
    CHECK(sites[0].heads == 1);
    const Tensor p = h.cache.at(sites[0].pattern(0)).data();  // (B, 1, T, S)
    CHECK(p.shape() == Shape{2, 1, 3, 4});
    CHECK(max_abs_diff(sum(p, {3}), ones({2, 1, 3})) < 1e-6);
    CHECK(max(abs(p.select(0, 1).select(0, 0).select(1, 3))).item() == 0.0);  // padded key
    CHECK(h.cache.at(sites[0].z(0)).shape() == Shape{2, 1, 3, 8});
    CHECK_ERROR_MENTIONS(m.W_O(sites[0], 0), "W_O");
  }
}

TEST_CASE("gradcheck: the recurrent encoder-decoders and Bahdanau's attention in float64") {
  for (const char* name : {"bahdanau_attention", "rnn_seq2seq_additive", "rnn_seq2seq_fixed"})
    for (MaskKind mask : {MaskKind::none, MaskKind::padding}) {
      INFO(name << (mask == MaskKind::none ? " unpadded" : " padded"));
      const ScopedThreads one(1);
      CHECK(all_passed(run_gradcheck(
          name, find_gradcheck_layer(name).build({.mask = mask, .scale = {}, .seed = 3}))));
    }
}

TEST_CASE("rnn seq2seq: a config that cannot work names its key, one line each") {
  const auto fails = [](auto edit, const char* key, const char* says) {
    ModelConfig c = tiny_rnn_config(true);
    c.src_vocab = c.tgt_vocab = 7;
    edit(c);
    INFO(key);
    CHECK_ERROR_MENTIONS(c.validate(), key, says);
  };
  fails([](ModelConfig& c) { c.encoder = EncoderKind::attention; },
        "model.encoder:", "\"gru\" or \"lstm\"");
  fails([](ModelConfig& c) { c.encoder = EncoderKind::conv; }, "model.encoder:", "\"conv\"");
  fails([](ModelConfig& c) { c.decoder_layers = 2; }, "model.decoder_layers:", "= 1");
  fails([](ModelConfig& c) { c.position = PositionKind::sinusoidal; },
        "model.position:", "\"none\"");
  fails([](ModelConfig& c) { c.tie_output = true; }, "model.tie_output:", "false");
  fails([](ModelConfig& c) { c.attention = AttentionKind::dot; },
        "model.attention:", "\"additive\"");
  fails(
      [](ModelConfig& c) {
        c.kind = ModelKind::decoder;
        c.encoder = EncoderKind::attention;
      },
      "model.decoder:", "takes only \"attention\"");
  fails(
      [](ModelConfig& c) {
        c.decoder = DecoderKind::attention;
        c.cross_attention = false;
      },
      "model.cross_attention:", "decoder = \"gru\"");
  ModelConfig ok = tiny_rnn_config(false);
  ok.attention = AttentionKind::dot;  // without attention the scorer is not read
  ok.validate();
}
