// Seq2Seq with model.encoder = gru, lstm or conv (nn/sequence_encoder.hpp): the encoder's
// parameters under "encoder.rnn." / "encoder.conv." with torch's names, its hook points listed
// as a pass reaches them, no encoder attention site, padding that changes nothing real, and the
// whole model gradchecked in float64 through cross-entropy.
#include <catch2/catch.hpp>

#include "nn/attention_site.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

ModelConfig with_encoder(EncoderKind kind) {
  ModelConfig c = tiny_config(false);
  c.encoder = kind;
  return c;
}

// gradcheck's tiny encoder-decoder: d_model 4, 2 heads, d_ff 6, one layer each side, no dropout
ModelConfig gradcheck_model(EncoderKind kind) {
  ModelConfig c;
  c.d_model = 4;
  c.heads = 2;
  c.d_ff = 6;
  c.encoder_layers = c.decoder_layers = 1;
  c.dropout = 0;
  c.encoder = kind;
  return c;
}

constexpr EncoderKind kKinds[] = {EncoderKind::gru, EncoderKind::lstm, EncoderKind::conv};

}  // namespace

TEST_CASE("seq2seq encoders: gru, lstm and conv name their parameters and hook points") {
  for (EncoderKind kind : kKinds) {
    INFO(name_of(kind));
    Generator g(1);
    Seq2Seq m(with_encoder(kind), g);
    m.eval();
    std::vector<std::string> encoder_params;
    for (const auto& [name, p] : m.named_parameters())
      if (name.rfind("encoder.", 0) == 0) encoder_params.push_back(name);
    REQUIRE(!encoder_params.empty());
    if (kind == EncoderKind::conv) {
      CHECK(encoder_params.front() == "encoder.conv.layers.0.conv.weight");
    } else {  // torch.nn.GRU / LSTM's names under encoder.rnn., d_model 8 split in two directions
      CHECK(encoder_params.front() == "encoder.rnn.weight_ih_l0");
      CHECK(encoder_params.back() == "encoder.rnn.bias_hh_l0_reverse");
      CHECK(m.sequence_encoder->rnn->hidden_size == 4);
    }
    for (const AttentionSite& s : m.attention_sites()) CHECK(s.name != "encoder");
    // the listing is what a pass reaches, in order
    Hooks h;
    h.capture = names_matching({"*"});
    const Tensor src = from_vector<int64_t>({1, 4, 6, 2, 3, 5, 1, 0}, {2, 4});
    const Tensor tgt = from_vector<int64_t>({1, 2, 3, 1, 5, 4}, {2, 3});
    {
      HookScope scope(h);
      m.forward(src, tgt, valid_mask({4, 3}, 4), valid_mask({3, 3}, 3));
    }
    CHECK(h.passed == hook_points(m));
    const std::string first =
        kind == EncoderKind::conv ? "encoder.conv.0.conv" : "encoder.rnn.0.out";
    CHECK(h.passed.at(1) == first);
    CHECK(h.cache.at(first).shape() == Shape{2, 4, 8});
  }
}

TEST_CASE("seq2seq encoders: what sits at a padded source position changes no logit") {
  for (EncoderKind kind : kKinds) {
    INFO(name_of(kind));
    Generator g(2);
    Seq2Seq m(with_encoder(kind), g);
    m.eval();
    const Tensor sv = valid_mask({4, 2}, 4), tv = valid_mask({3, 3}, 3);
    const Tensor tgt = from_vector<int64_t>({1, 2, 3, 1, 5, 4}, {2, 3});
    const Var a = m.forward(from_vector<int64_t>({1, 4, 6, 2, 3, 5, 0, 0}, {2, 4}), tgt, sv, tv);
    const Var b = m.forward(from_vector<int64_t>({1, 4, 6, 2, 3, 5, 6, 1}, {2, 4}), tgt, sv, tv);
    CHECK(same_bits(a.data(), b.data()));
  }
}

TEST_CASE("gradcheck: Seq2Seq with a gru, lstm and conv encoder in float64, padded") {
  for (EncoderKind kind : kKinds) {
    INFO(name_of(kind));
    const ModelConfig c = gradcheck_model(kind);
    LayerCheckOptions o;
    o.mask = MaskKind::both;
    const GradcheckProblem p = model_gradcheck_problem(c, o);
    check_gradients(p.f, p.inputs);
  }
}
