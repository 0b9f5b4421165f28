// The block options of [model] (norm, activation relu2 / swiglu, qk_norm, tie_output for the
// decoder, logit_softcap): each op and layer gradchecked in float64, whole models with every
// option gradchecked and decoded incrementally as they run in full, and the new parameters
// saved and loaded. (Parity with PyTorch: test_block_options_reference.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>

#include "nn/decoder_lm.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using Ins = const std::vector<Var>&;

TEST_CASE("gradcheck: rms_norm, with and without a gain") {
  Generator g(21);
  for (const double eps : {1e-6, 1e-2}) {
    check_gradients([&](Ins in) { return ag::rms_norm(in[0], in[1], eps); },
                    {leaf({2, 3, 5}, g), leaf({5}, g, DType::f64, 0.5, 1.5)});
    check_gradients([&](Ins in) { return ag::rms_norm(in[0], Var(), eps); }, {leaf({4, 6}, g)});
  }
  RMSNorm n(5, 1e-3);
  n.to(DType::f64);
  n.weight.data().copy_(uniform({5}, 0.5, 1.5, g, DType::f64));
  check_gradients([&](Ins in) { return n.forward(in[0]); }, with_params({leaf({2, 3, 5}, g)}, n));
  CHECK(n.parameter_count() == 5);  // a gain, no bias
  // its definition: unit root-mean-square rows when the gain is 1
  RMSNorm unit(8, 1e-12);
  const Tensor y = unit.forward(Var(randn({3, 8}, g))).data();
  for (int64_t r = 0; r < 3; ++r)
    CHECK(std::sqrt(mean(mul(y.select(0, r), y.select(0, r))).item()) == Approx(1).epsilon(1e-5));
  CHECK_THROWS_WITH(ag::rms_norm(Var(randn({2, 4}, g)), Var(ones({3})), 1e-5),
                    Catch::Contains("rms_norm: x (2, 4) and gamma (3) do not fit"));
}

TEST_CASE("gradcheck: relu2, swiglu and their feed-forward networks, soft cap") {
  Generator g(22);
  check_gradients([&](Ins in) { return activate(in[0], Activation::relu2); },
                  {leaf({3, 7}, g, DType::f64, -2, 2)});
  check_gradients([&](Ins in) { return swiglu(in[0], in[1]); }, {leaf({3, 5}, g), leaf({3, 5}, g)});
  for (Activation a : {Activation::relu2, Activation::swiglu}) {
    INFO(name_of(a));
    PositionwiseFeedForward ffn(4, 7, g, a, 0.0, nullptr);
    ffn.to(DType::f64);
    CHECK((a == Activation::swiglu) == static_cast<bool>(ffn.linear3));
    check_gradients([&](Ins in) { return ffn.forward(in[0]); },
                    with_params({leaf({2, 3, 4}, g)}, ffn));
  }
  for (const double cap : {0.5, 3.0})
    check_gradients([&](Ins in) { return soft_cap(in[0], cap); },
                    {leaf({4, 6}, g, DType::f64, -5, 5)});
  const Var x(uniform({50}, -100, 100, g));
  CHECK(max(abs(soft_cap(x, 15).data())).item() < 15);
  CHECK(to_vector<float>(soft_cap(x, 0).data()) == to_vector<float>(x.data()));  // 0: off
  CHECK_THROWS_WITH(activate(x, Activation::swiglu), Catch::Contains("swiglu gates two inputs"));
}

TEST_CASE("gradcheck: multi-head attention with qk_norm, self (rope, causal) and cross") {
  Generator g(23);
  for (PositionKind p : {PositionKind::none, PositionKind::rope}) {
    INFO(name_of(p));
    MultiHeadAttention a(8, 2, g);
    a.use_positions(p);
    a.use_qk_norm(1e-5);
    a.to(DType::f64);
    const Tensor mask = causal_mask(4);
    check_gradients([&](Ins in) { return a.forward(in[0], in[0], in[0], mask); },
                    with_params({leaf({2, 4, 8}, g)}, a));
  }
  MultiHeadAttention cross(8, 2, g);
  cross.use_qk_norm(1e-5);
  cross.to(DType::f64);
  const Tensor pad = key_padding_mask(valid_mask({5, 3}, 5));
  check_gradients([&](Ins in) { return cross.forward(in[0], in[1], in[1], pad); },
                  with_params({leaf({2, 3, 8}, g), leaf({2, 5, 8}, g)}, cross));
}

namespace {

// Every block option on at once.
ModelConfig all_options(ModelConfig c, Activation a) {
  c.norm = NormKind::rmsnorm;
  c.qk_norm = true;
  c.activation = a;
  c.logit_softcap = 4.0;
  return c;
}

}  // namespace

TEST_CASE("gradcheck: models with every block option, both kinds, through cross-entropy") {
  const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 0, 0}, {2, 4});
  const Tensor tgt_in = from_vector<int64_t>({0, 1, 2, 0, 3, 4}, {2, 3});
  const Tensor tgt_out = from_vector<int64_t>({1, 2, 5, 3, 4, -100}, {6});
  const Tensor sv = valid_mask({4, 2}, 4), tv = valid_mask({3, 2}, 3);
  for (bool nf : {false, true}) {
    Generator g(24);
    ModelConfig c = all_options(tiny_config(nf), Activation::swiglu);
    c.d_model = 4, c.d_ff = 6, c.decoder_layers = 1;
    Seq2Seq m(c, g);
    m.to(DType::f64);
    check_gradients(
        [&](Ins) {
          const Var logits = m.forward(src, tgt_in, sv, tv);
          return ag::cross_entropy(ag::reshape(logits, {6, c.tgt_vocab}), tgt_out, -100, 0.1);
        },
        with_params({}, m));
  }
  Generator g(25);
  ModelConfig lc = all_options(tiny_lm(PositionKind::rope), Activation::relu2);
  lc.tie_output = false;
  lc.d_model = 4, lc.d_ff = 6, lc.decoder_layers = 1;
  DecoderLM lm(lc, g);
  lm.to(DType::f64);
  REQUIRE(lm.output);
  const Tensor ids = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor next = from_vector<int64_t>({2, 3, 4, 5, 6, 1}, {6});
  check_gradients(
      [&](Ins) {
        const Var logits = lm.forward(ids);
        return ag::cross_entropy(ag::reshape(logits, {6, lc.tgt_vocab}), next, -1);
      },
      with_params({}, lm));
}

TEST_CASE("block options: incremental decoding equals the full pass, both kinds") {
  Generator g(26);
  for (Activation a : {Activation::relu2, Activation::swiglu}) {
    INFO(name_of(a));
    // the encoder-decoder: decode_step token by token against decode of the whole prefix
    ModelConfig c = all_options(tiny_config(true), a);
    c.position = PositionKind::rope;
    Seq2Seq m(c, g);
    m.eval();
    const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 1, 0}, {2, 4});
    const Tensor sv = valid_mask({4, 3}, 4);
    const Tensor tgt = from_vector<int64_t>({0, 3, 1, 2, 0, 4, 4, 5}, {2, 4});
    ag::NoGrad no_grad;
    const Var memory = m.encode(src, sv);
    const Tensor full = m.decode(memory, sv, tgt, ones({2, 4}, DType::b8)).data();
    auto state = m.start_decoding(memory, sv);
    for (int64_t t = 0; t < 4; ++t) {
      const Tensor step = m.decode_step(state, tgt.select(1, t).contiguous()).data();
      CHECK(max_abs_diff(step, full.select(1, t)) < 1e-5);
    }
    // the decoder-only LM, untied: step() with the cache against forward()
    ModelConfig lc = all_options(tiny_lm(), a);
    lc.tie_output = false;
    DecoderLM lm(lc, g);
    lm.eval();
    const Tensor ids = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 0, 1, 2, 3}, {2, 5});
    const Tensor whole = lm.forward(ids).data();
    DecoderLM::Cache cache;
    const Tensor prompt = lm.step(cache, ids.narrow(1, 0, 2).contiguous()).data();
    CHECK(max_abs_diff(prompt, whole.narrow(1, 0, 2)) < 1e-5);
    for (int64_t t = 2; t < 5; ++t) {
      const Tensor s = lm.step(cache, ids.narrow(1, t, 1).contiguous()).data();
      CHECK(max_abs_diff(s.select(1, 0), whole.select(1, t)) < 1e-5);
    }
    CHECK(max(abs(whole)).item() < 4.0);  // soft-capped
  }
}

TEST_CASE("block options: the new parameters are named, counted, saved and loaded") {
  Generator g(27);
  ModelConfig c = all_options(tiny_config(false), Activation::swiglu);
  Seq2Seq m(c, g);
  std::map<std::string, Shape> shapes;
  for (const auto& [n, v] : m.named_parameters()) shapes[n] = v.shape();
  CHECK(shapes.at("encoder.layers.0.ffn.linear3.weight") == Shape{12, 8});
  CHECK(shapes.at("decoder.layers.1.norm3.weight") == Shape{8});
  CHECK_FALSE(shapes.count("decoder.layers.1.norm3.bias"));  // RMSNorm: no bias
  ModelConfig lc = tiny_lm();
  lc.tie_output = false;
  DecoderLM lm(lc, g);
  bool head = false;
  for (const auto& [n, v] : lm.named_parameters()) head = head || n == "output.weight";
  CHECK(head);
  ModelConfig tied = tiny_lm();
  Generator g2(27);
  CHECK(DecoderLM(tied, g2).parameter_count() + 7 * 8 == lm.parameter_count());
  // a state dict round trip into a model of the same config
  Generator g3(99);
  Seq2Seq twin(c, g3);
  twin.load_state_dict(m.state_dict());
  const auto a = m.state_dict(), b = twin.state_dict();
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(to_vector<float>(a[i].second) == to_vector<float>(b[i].second));
  // and a config without swiglu refuses it
  Generator g4(1);
  Seq2Seq relu(tiny_config(false), g4);
  CHECK_THROWS(relu.load_state_dict(m.state_dict()));
}

TEST_CASE("block options: bad values name the key") {
  ModelConfig c = tiny_config(false);
  c.logit_softcap = -1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("model.logit_softcap: must be >= 0"));
  CHECK_THROWS_WITH(parse_name<NormKind>("batchnorm", "model.norm"),
                    "model.norm: must be layernorm or rmsnorm, got 'batchnorm'");
  CHECK_THROWS_WITH(parse_name<Activation>("swiglue", "model.activation"),
                    Catch::Contains("did you mean 'swiglu'?"));
}
