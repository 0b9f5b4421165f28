// Heads by name and their ablation (inspect/heads.hpp) on tiny models of both kinds: removing a
// head through the hooks is removing it from W_O, the mask variables' gradients are right, and
// bad names are one clear error each.
#include <catch2/catch.hpp>

#include "inspect/heads.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/seq2seq.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::inspect;
using namespace qkv::testing;
using ag::Var;

namespace {

struct Lm {
  nn::DecoderLM lm;
  Tensor ids = from_vector<int64_t>({0, 3, 6, 3, 1, 2, 2, 5, 4, 0, 1, 1}, {2, 6});
  Lm()
      : lm([] {
          Generator g(5);
          return nn::DecoderLM(tiny_lm(), g);
        }()) {
    lm.eval();
  }
  Tensor run(nn::Hooks* h = nullptr) const {
    std::optional<nn::HookScope> s;
    if (h) s.emplace(*h);
    return lm.forward(ids).data().clone();
  }
};

struct Pairs {
  nn::Seq2Seq m;
  Tensor src = from_vector<int64_t>({1, 4, 6, 2, 3, 5, 1, 0}, {2, 4});
  Tensor tgt = from_vector<int64_t>({1, 2, 3, 1, 5, 4}, {2, 3});
  Tensor sv = ne(from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 0}, {2, 4}), 0.0);
  Tensor tv = ones({2, 3}, DType::b8);
  Pairs()
      : m([] {
          Generator g(7);
          return nn::Seq2Seq(tiny_config(true, true), g);
        }()) {
    m.eval();
  }
  Tensor run(nn::Hooks* h = nullptr) const {
    std::optional<nn::HookScope> s;
    if (h) s.emplace(*h);
    return m.forward(src, tgt, sv, tv).data().clone();
  }
};

// W_O's columns that read head h (d_head of them), set to 0.
void zero_columns(nn::MultiHeadAttention& attn, int64_t head, int64_t heads) {
  Tensor& w = attn.w_o->weight.data();  // (d, d): out x in
  const int64_t dh = w.size(1) / heads;
  for (int64_t i = 0; i < w.size(0); ++i)
    for (int64_t j = head * dh; j < (head + 1) * dh; ++j) w.data<float>()[i * w.size(1) + j] = 0;
}

}  // namespace

TEST_CASE("heads: a model's attentions and their names, as TransformerLens counts (from 0)") {
  Lm lm;
  const auto a = attentions_of(lm.lm, 2);
  REQUIRE(a.size() == 1);
  CHECK(a[0].name == "self");
  CHECK(a[0].layers == 2);
  CHECK(a[0].z(1) == "blocks.1.attn.z");
  CHECK(a[0].head_name(1, 0) == "1.0");
  Pairs p;
  const auto b = attentions_of(p.m, 2);
  REQUIRE(b.size() == 3);
  CHECK(b[0].name == "encoder");
  CHECK(b[0].layers == 1);
  CHECK(b[1].z(1) == "decoder.blocks.1.attn.z");
  CHECK(b[2].z(0) == "decoder.blocks.0.cross.z");
  CHECK(b[2].head_name(1, 1) == "cross.1.1");
  const auto h = parse_heads("cross.1.1,encoder.0.0,cross.1.1", b, "test");
  REQUIRE(h.size() == 2);  // the same head twice counts once
  CHECK(h[0].name() == "cross.1.1");
  CHECK(h[1].attention.z(h[1].layer) == "encoder.blocks.0.attn.z");
}

TEST_CASE("heads: an unknown attention, layer or head is one error naming the nearest head") {
  Lm lm;
  Pairs p;
  const auto a = attentions_of(lm.lm, 2), b = attentions_of(p.m, 2);
  CHECK_THROWS_WITH(parse_heads("2.1", a, "eval --ablate"),
                    "eval --ablate: no head 2.1 (nearest: 1.1): layers 0..1, heads 0..1");
  CHECK_THROWS_WITH(parse_heads("0.7", a, "x"), Catch::Contains("nearest: 0.1"));
  CHECK_THROWS_WITH(parse_heads("encoder.3.0", b, "x"),
                    Catch::Contains("no head encoder.3.0 (nearest: encoder.0.0): layers 0..0"));
  CHECK_THROWS_WITH(parse_heads("self.0.0", b, "x"),
                    Catch::Contains("no attention 'self' (encoder, decoder or cross)"));
  CHECK_THROWS_WITH(parse_heads("0.1", b, "x"), Catch::Contains("expected ATTENTION.LAYER.HEAD"));
  CHECK_THROWS_WITH(parse_heads("cross.0.1", a, "x"), Catch::Contains("expected LAYER.HEAD"));
  CHECK_THROWS_WITH(parse_heads("0.x", a, "x"), Catch::Contains("numbers from 0"));
  CHECK_THROWS_WITH(parse_heads("0.1,,1.0", a, "x"), Catch::Contains("an empty head name"));
  CHECK(parse_heads("", a, "x").empty());
}

TEST_CASE("heads: a trailing, leading or doubled comma is the same error as a comma alone") {
  Pairs p;
  const auto b = attentions_of(p.m, 2);
  for (const std::string spec :
       {",", "cross.0.1,", ",cross.0.1", "cross.0.1,,cross.1.0", "cross.0.1,,", ",,"}) {
    INFO(spec);
    CHECK_THROWS_WITH(parse_heads(spec, b, "translate --ablate"),
                      "translate --ablate: an empty head name in '" + spec + "'");
  }
  CHECK(parse_heads("cross.0.1,cross.1.0", b, "x").size() == 2);
}

TEST_CASE("heads: zero-ablating a head through hooks is zeroing its slice of W_O's input") {
  SECTION("a language model's self-attention") {
    Lm c;
    const auto a = attentions_of(c.lm, 2);
    nn::Hooks h;
    add_zero_ablation(h, parse_heads("1.0", a, "test"));
    const Tensor hooked = c.run(&h);
    CHECK_FALSE(same_bits(hooked, c.run()));
    zero_columns(*c.lm.blocks->layers[1]->self_attn, 0, 2);
    CHECK(same_bits(hooked, c.run()));
  }
  SECTION("an encoder-decoder's cross-attention and encoder") {
    Pairs c;
    const auto a = attentions_of(c.m, 2);
    nn::Hooks h;
    add_zero_ablation(h, parse_heads("cross.1.1,encoder.0.0", a, "test"));
    const Tensor hooked = c.run(&h);
    zero_columns(*c.m.decoder->layers[1]->cross_attn, 1, 2);
    zero_columns(*c.m.encoder->layers[0]->self_attn, 0, 2);
    CHECK(same_bits(hooked, c.run()));
  }
}

TEST_CASE("heads: no heads ablated changes no bit, and every head ablated is allowed") {
  Lm c;
  const auto a = attentions_of(c.lm, 2);
  nn::Hooks none;
  add_zero_ablation(none, parse_heads("", a, "test"));
  CHECK(none.replace.empty());
  CHECK(same_bits(c.run(&none), c.run()));
  nn::Hooks all;
  add_zero_ablation(all, parse_heads("0.0,0.1,1.0,1.1", a, "test"));
  const Tensor out = c.run(&all);
  for (auto& block : c.lm.blocks->layers)
    for (int64_t h = 0; h < 2; ++h) zero_columns(*block->self_attn, h, 2);
  CHECK(same_bits(out, c.run()));
}

TEST_CASE("heads: mean-ablation puts the given mean in the head's slice and keeps the others") {
  Lm c;
  const auto a = attentions_of(c.lm, 2);
  MeanZ means;
  means["blocks.0.attn.z"] = full({1, 2, 1, 4}, 0.25);
  nn::Hooks h;
  add_mean_ablation(h, parse_heads("0.1", a, "test"), means);
  h.capture = nn::names_matching({"blocks.0.attn.z"});
  c.run(&h);
  nn::Hooks plain;
  plain.capture = h.capture;
  c.run(&plain);
  const Tensor z = h.cache.at("blocks.0.attn.z").data(),
               z0 = plain.cache.at("blocks.0.attn.z").data();
  CHECK(same_bits(z.select(1, 0), z0.select(1, 0)));
  CHECK(same_bits(z.select(1, 1), full({2, 6, 4}, 0.25)));
}

TEST_CASE("heads: dL/dxi of the head masks, gradchecked in float64") {
  Lm c;
  c.lm.to(DType::f64);
  nn::Hooks h;
  const auto xi = add_head_masks(h, attentions_of(c.lm, 2), DType::f64);
  REQUIRE(xi.size() == 2);
  std::vector<Var> in;
  for (const auto& [point, x] : xi) in.push_back(x);
  const Tensor labels = from_vector<int64_t>({3, 6, 3, 1, 2, 2, 4, 0, 1, 1, 2, 3}, {12});
  nn::HookScope scope(h);
  check_gradients(
      [&](const std::vector<Var>&) {
        const Var logits = c.lm.forward(c.ids);
        return ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), labels, -1);
      },
      in);
}
