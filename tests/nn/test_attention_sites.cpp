// Attention sites (nn/attention_site.hpp) and the typed read-outs of nn::Model: each family's
// sites from its structure (names, titles, sides, hook points that exist), W_O as the module
// the site's z flows into, and read_out of the last block's output as the model's own logits,
// bit for bit -- for the encoder-decoder, the decoder-only LM and the encoder classifier.
#include <catch2/catch.hpp>

#include <algorithm>

#include "nn/decoder_lm.hpp"
#include "nn/encoder_classifier.hpp"
#include "nn/hooks.hpp"
#include "nn/seq2seq.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

bool has_point(const Model& m, const std::string& name) {
  const std::vector<std::string> all = hook_points(m);
  return std::find(all.begin(), all.end(), name) != all.end();
}

// Every layer's z and pattern of every site is a hook point of the model; nothing else is.
void check_points_exist(const Model& m) {
  size_t patterns = 0;
  for (const std::string& p : hook_points(m))
    patterns += p.size() > 8 && p.compare(p.size() - 8, 8, ".pattern") == 0;
  size_t listed = 0;
  for (const AttentionSite& s : m.attention_sites())
    for (int64_t l = 0; l < s.layers; ++l) {
      INFO(s.name << " " << l);
      CHECK(has_point(m, s.z(l)));
      CHECK(has_point(m, s.pattern(l)));
      CHECK(has_point(m, s.prefix + std::to_string(l) + ".resid_pre"));
      ++listed;
    }
  CHECK(listed == patterns);
}

ModelConfig tiny_classifier(bool norm_first) {
  ModelConfig c;
  c.src_vocab = 9;
  c.tgt_vocab = 3;
  set_tiny_sizes(c);
  c.encoder_layers = 3;
  c.norm_first = norm_first;
  return c;
}

// The logits of a forward pass, and read_out of the last block's output it captured.
std::pair<Tensor, Tensor> logits_and_read_out(const Model& m, const Tensor& src,
                                              const Tensor& tgt_in, const Tensor& valid) {
  const Model::Stream s = m.output_stream();
  const std::string last = s.blocks + std::to_string(s.layers - 1) + ".resid_post";
  Hooks h;
  h.capture = names_matching({last});
  Tensor logits;
  {
    const HookScope scope(h);
    logits = m.forward(src, tgt_in, valid, valid).data();
  }
  return {logits, m.read_out(h.cache.at(last), valid).data()};
}

}  // namespace

TEST_CASE("attention sites: an encoder-decoder has encoder, decoder and cross, in forward order") {
  Generator g(3);
  const Seq2Seq m(tiny_config(true), g);
  const std::vector<AttentionSite> s = m.attention_sites();
  REQUIRE(s.size() == 3);
  CHECK(s[0].name == "encoder");
  CHECK(s[0].title == "encoder self-attention");
  CHECK((s[0].queries == Side::input && s[0].keys == Side::input && !s[0].causal));
  CHECK(s[0].layers == 1);
  CHECK(s[0].heads == 2);
  CHECK(s[1].name == "decoder");
  CHECK((s[1].queries == Side::output && s[1].keys == Side::output && s[1].causal));
  CHECK(s[1].hook() == "decoder.blocks.{l}.attn");
  CHECK(s[2].name == "cross");
  CHECK(s[2].title == "cross-attention");
  CHECK((s[2].queries == Side::output && s[2].keys == Side::input && s[2].cross()));
  CHECK(s[2].layers == 2);
  CHECK(s[2].z(1) == "decoder.blocks.1.cross.z");
  CHECK(s[2].pattern(0) == "decoder.blocks.0.cross.pattern");
  CHECK(s[2].head_name(1, 0) == "cross.1.0");
  CHECK(s[0].key == "encoder_self");
  CHECK(s[1].key == "decoder_self");
  CHECK(s[2].key == "cross");
  CHECK(s[0].metric_key() == "encoder_self");
  CHECK(s[1].metric_key() == "decoder_self");
  CHECK(s[2].metric_key() == "decoder_cross");
  CHECK(s[0].head_name(0, 1) == "encoder.0.1");
  check_points_exist(m);
}

TEST_CASE("attention sites: a decoder-only LM and an encoder classifier have one site, self") {
  Generator g(4);
  const DecoderLM lm(tiny_lm(), g);
  const std::vector<AttentionSite> a = lm.attention_sites();
  REQUIRE(a.size() == 1);
  CHECK(a[0].name == "self");
  CHECK(a[0].title == "causal self-attention");
  CHECK((a[0].queries == Side::output && a[0].keys == Side::output && a[0].causal));
  CHECK(a[0].z(1) == "blocks.1.attn.z");
  CHECK(a[0].head_name(1, 0) == "1.0");  // a model's only site: no prefix
  CHECK(a[0].key == "causal");
  CHECK(a[0].metric_key() == "decoder_self");
  check_points_exist(lm);

  const EncoderClassifier c(tiny_classifier(false), g, Pooling::mean);
  const std::vector<AttentionSite> b = c.attention_sites();
  REQUIRE(b.size() == 1);
  CHECK(b[0].name == "self");
  CHECK(b[0].title == "self-attention");
  CHECK((b[0].queries == Side::input && b[0].keys == Side::input && !b[0].causal));
  CHECK(b[0].layers == 3);
  CHECK(b[0].heads == 2);
  CHECK(b[0].head_name(2, 1) == "2.1");
  CHECK(b[0].metric_key() == "encoder_self");
  check_points_exist(c);
}

TEST_CASE("attention sites: an encoder-decoder without encoder layers lists no encoder site") {
  ModelConfig cfg = tiny_config(false);
  cfg.encoder_layers = 0;
  Generator g(5);
  const Seq2Seq m(cfg, g);
  const std::vector<AttentionSite> s = m.attention_sites();
  REQUIRE(s.size() == 2);
  CHECK(s[0].name == "decoder");
  CHECK(s[1].name == "cross");
}

TEST_CASE("read-outs: W_O is the module whose input is the site's z") {
  Generator g(6);
  const Seq2Seq m(tiny_config(true), g);
  for (const AttentionSite& s : m.attention_sites())
    for (int64_t l = 0; l < s.layers; ++l) {
      INFO(s.name << " " << l);
      const MultiHeadAttention& a = s.name == "encoder"   ? *m.encoder->layers[l]->self_attn
                                    : s.name == "decoder" ? *m.decoder->layers[l]->self_attn
                                                          : *m.decoder->layers[l]->cross_attn;
      CHECK(&m.W_O(s, l) == a.w_o.get());
    }
  const DecoderLM lm(tiny_lm(), g);
  const AttentionSite self = lm.attention_sites()[0];
  CHECK(&lm.W_O(self, 1) == lm.blocks->layers[1]->self_attn->w_o.get());
  CHECK_THROWS_WITH(lm.W_O(self, 2), Catch::Contains("layers 0..1"));
  AttentionSite cross = m.attention_sites()[2];
  CHECK_THROWS_WITH(lm.W_O(cross, 0), Catch::Contains("no attention 'cross'"));
  const EncoderClassifier c(tiny_classifier(true), g);
  const AttentionSite only = c.attention_sites()[0];
  for (int64_t l = 0; l < 3; ++l)
    CHECK(&c.W_O(only, l) == c.blocks->layers[l]->self_attn->w_o.get());
  CHECK(c.output_layer().weight.data().shape() == Shape{3, 8});  // the classifier: C x d
  CHECK(c.output_stream().blocks == "blocks.");
  CHECK(c.output_stream().layers == 3);
  CHECK(c.output_stream().final_norm == c.blocks->norm.get());
}

TEST_CASE("read-outs: pool reads one position (cls), the real positions' mean, or every position") {
  Generator g(8);
  const Tensor h = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 4, 3});
  const Tensor valid = valid_mask({3}, 4);
  const DecoderLM lm(tiny_lm(), g);
  CHECK(same_bits(lm.pool(Var(h), valid).data(), h));  // every position its own logits
  const EncoderClassifier cls(tiny_classifier(false), g, Pooling::cls);
  CHECK(same_bits(cls.pool(Var(h), valid).data(), from_vector<double>({1, 2, 3}, {1, 1, 3})));
  const EncoderClassifier mean(tiny_classifier(false), g, Pooling::mean);
  const Tensor m = mean.pool(Var(h), valid).data();  // (1 + 4 + 7) / 3, ...: padding left out
  REQUIRE(m.shape() == Shape{1, 1, 3});
  for (int64_t i = 0; i < 3; ++i) CHECK(m.data<double>()[i] == Approx(4.0 + i).epsilon(1e-14));
}

TEST_CASE("read-outs: read_out of the last block's output is the model's logits, bit for bit") {
  Generator g(7);
  SECTION("an encoder-decoder, pre-LN and post-LN") {
    for (const bool pre : {true, false}) {
      INFO("norm_first " << pre);
      Seq2Seq m(tiny_config(pre, true), g);
      m.eval();
      const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 2, 3}, {2, 4});
      const Tensor tgt = from_vector<int64_t>({1, 2, 3, 3, 4, 5, 1, 1}, {2, 4});
      const Tensor valid = ones({2, 4}, DType::b8);
      const auto [logits, read] = logits_and_read_out(m, src, tgt, valid);
      CHECK(m.output_stream().blocks == "decoder.blocks.");
      CHECK(m.output_stream().final_norm == m.decoder->norm.get());
      CHECK(same_bits(logits, read));
    }
  }
  SECTION("a decoder-only LM") {
    DecoderLM lm(tiny_lm(), g);
    lm.eval();
    const Tensor ids = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {1, 6});
    const auto [logits, read] = logits_and_read_out(lm, Tensor(), ids, Tensor());
    CHECK(read.shape() == Shape{1, 6, 7});
    CHECK(same_bits(logits, read));
  }
  SECTION("an encoder classifier: the class logits at the pooled position") {
    for (const Pooling pool : {Pooling::cls, Pooling::mean})
      for (const bool pre : {true, false}) {
        INFO("pool " << static_cast<int>(pool) << " norm_first " << pre);
        EncoderClassifier c(tiny_classifier(pre), g, pool);
        c.eval();
        const Tensor src = from_vector<int64_t>({4, 5, 6, 7, 4, 8, 0, 0}, {2, 4});
        const Tensor valid = valid_mask({4, 2}, 4);
        const auto [logits, read] = logits_and_read_out(c, src, Tensor(), valid);
        CHECK(read.shape() == Shape{2, 1, 3});
        CHECK(same_bits(logits, read));
      }
  }
}
