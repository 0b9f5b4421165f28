// Named hook points (nn/hooks.hpp): the names each model passes, capture, replace, gradients
// through a replacement, and hooks that change nothing when they change nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "nn/encoder_classifier.hpp"
#include "nn/hooks.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The names that contain part.
std::vector<std::string> named_with(const std::vector<std::string>& names,
                                    const std::string& part) {
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (n.find(part) != std::string::npos) out.push_back(n);
  return out;
}

// Exact equality, element by element (== treats -0 and +0 as equal, as zeroing may differ there).
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const auto x = to_vector<double>(a.to(DType::f64)), y = to_vector<double>(b.to(DType::f64));
  return x == y;
}

struct LmCase {
  DecoderLM lm;
  Tensor ids;
  explicit LmCase(ModelConfig c = tiny_lm(), uint64_t seed = 5)
      : lm([&] {
          Generator g(seed);
          return DecoderLM(c, g);
        }()),
        ids(from_vector<int64_t>({0, 3, 6, 3, 1, 2, 2, 5, 4, 0, 1, 1}, {2, 6})) {
    lm.eval();
  }
};

struct S2SCase {
  Seq2Seq m;
  Tensor src, tgt, sv, tv;
  explicit S2SCase(bool norm_first = false)
      : m([&] {
          Generator g(7);
          return Seq2Seq(tiny_config(norm_first, true), g);
        }()),
        src(from_vector<int64_t>({1, 4, 6, 2, 3, 5, 1, 0}, {2, 4})),
        tgt(from_vector<int64_t>({1, 2, 3, 1, 5, 4}, {2, 3})),
        sv(ne(from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 0}, {2, 4}), 0.0)),
        tv(ones({2, 3}, DType::b8)) {
    m.eval();
  }
  Var run() const { return m.forward(src, tgt, sv, tv); }
};

}  // namespace

TEST_CASE("hook points: a decoder-only LM names every activation, in forward order") {
  LmCase c;
  const std::vector<std::string> names = hook_points(c.lm);
  for (const char* n :
       {"embed", "blocks.0.resid_pre", "blocks.0.attn.q", "blocks.0.attn.k", "blocks.0.attn.v",
        "blocks.0.attn.pattern", "blocks.0.attn.z", "blocks.0.attn_out", "blocks.0.resid_mid",
        "blocks.1.mlp.pre", "blocks.1.mlp.post", "blocks.1.mlp_out", "blocks.1.resid_post",
        "final_norm", "logits"})
    CHECK(has(names, n));
  CHECK(names.front() == "embed");
  CHECK(names.back() == "logits");
  CHECK_FALSE(has(names, "blocks.2.resid_pre"));  // two layers
  CHECK_FALSE(has(names, "blocks.0.cross.z"));    // no cross-attention
}

TEST_CASE("hook points: an encoder-decoder prefixes encoder and decoder, with cross-attention") {
  S2SCase c;
  const std::vector<std::string> names = hook_points(c.m);
  for (const char* n : {"encoder.embed", "encoder.blocks.0.attn.pattern", "encoder.final_norm",
                        "decoder.embed", "decoder.blocks.1.attn.z", "decoder.blocks.1.cross.z",
                        "decoder.blocks.1.cross.pattern", "decoder.blocks.0.cross_out",
                        "decoder.blocks.0.resid_cross", "decoder.final_norm", "logits"})
    CHECK(has(names, n));
  CHECK_FALSE(has(names, "encoder.blocks.1.resid_pre"));  // one encoder layer
}

TEST_CASE("hook points: attention-only blocks pass no mlp points and no resid_mid") {
  ModelConfig lm_config = tiny_lm();
  lm_config.attn_only = true;
  LmCase c(lm_config);
  const std::vector<std::string> names = hook_points(c.lm);
  for (const char* n : {"embed", "blocks.0.resid_pre", "blocks.0.attn.z", "blocks.0.attn_out",
                        "blocks.0.resid_post", "blocks.1.attn.pattern", "blocks.1.resid_post",
                        "final_norm", "logits"})
    CHECK(has(names, n));
  CHECK(named_with(names, "mlp").empty());
  CHECK(named_with(names, "resid_mid").empty());
  // the block's output is its input plus what attention added (pre-LN)
  Hooks h;
  h.capture = names_matching({"blocks.0.*"});
  {
    HookScope scope(h);
    c.lm.forward(c.ids);
  }
  CHECK(max_abs_diff(h.cache.at("blocks.0.resid_post").data(),
                     add(h.cache.at("blocks.0.resid_pre").data(),
                         h.cache.at("blocks.0.attn_out").data())) < 1e-6);

  ModelConfig s2s_config = tiny_config(true, true);
  s2s_config.attn_only = true;
  Generator g(7);
  const Seq2Seq m(s2s_config, g);
  const std::vector<std::string> s2s = hook_points(m);
  for (const char* n : {"encoder.blocks.0.resid_post", "decoder.blocks.1.resid_mid",
                        "decoder.blocks.1.cross_out", "decoder.blocks.1.resid_post"})
    CHECK(has(s2s, n));
  CHECK(named_with(s2s, "mlp").empty());
  CHECK(named_with(s2s, "resid_cross").empty());
}

TEST_CASE("hooks: capture keeps each named activation with its documented shape") {
  LmCase c;
  Hooks h;
  h.capture = names_matching({"blocks.*", "logits"});
  Var logits;
  {
    HookScope scope(h);
    logits = c.lm.forward(c.ids);
  }
  const int64_t B = 2, n = 6, d = 8, heads = 2;
  CHECK(h.cache.at("blocks.0.attn.pattern").shape() == Shape{B, heads, n, n});
  CHECK(h.cache.at("blocks.1.attn.z").shape() == Shape{B, heads, n, d / heads});
  CHECK(h.cache.at("blocks.1.mlp.post").shape() == Shape{B, n, 12});
  CHECK(h.cache.at("blocks.0.resid_post").shape() == Shape{B, n, d});
  CHECK(same_values(h.cache.at("logits").data(), logits.data()));
  CHECK(h.cache.count("embed") == 0);  // not matched by the filter
}

TEST_CASE("hooks: the captured patterns are the attention maps forward returns") {
  S2SCase c;
  AttentionMaps maps;
  c.m.forward(c.src, c.tgt, c.sv, c.tv, &maps);
  Hooks h;
  h.capture = names_matching({"*.pattern"});
  {
    HookScope scope(h);
    c.run();
  }
  REQUIRE(maps.decoder_cross.size() == 2);
  // The first layer reads the same input either way: the same bits. Later layers read what
  // the fused kernel computed (a pass with maps takes the dense path in every layer instead),
  // so they agree to float32 rounding.
  CHECK(
      same_values(h.cache.at("encoder.blocks.0.attn.pattern").data(), maps.encoder_self[0].data()));
  CHECK(allclose(h.cache.at("decoder.blocks.1.attn.pattern").data(), maps.decoder_self[1].data(),
                 1e-5, 1e-6));
  CHECK(allclose(h.cache.at("decoder.blocks.1.cross.pattern").data(), maps.decoder_cross[1].data(),
                 1e-5, 1e-6));
}

TEST_CASE("hooks: capturing everything and identity replacements change no bit of the output") {
  for (bool norm_first : {false, true}) {
    S2SCase c(norm_first);
    const Tensor plain = c.run().data();
    Hooks h;
    h.capture = [](std::string_view) { return true; };
    for (const std::string& n : hook_points(c.m))
      if (n.find("pattern") == std::string::npos)  // a replaced pattern takes the dense path
        h.replace[n] = [](const Var& x) { return x; };
    HookScope scope(h);
    CHECK(same_values(c.run().data(), plain));
  }
}

TEST_CASE("hooks: zeroing a head's z equals zeroing its slice of W_O's input") {
  LmCase c;
  const int64_t layer = 1, head = 1, dh = 4;
  Hooks h;
  h.replace["blocks.1.attn.z"] = [&](const Var& z) {  // z: (B, h, n, d_head)
    Tensor m = ones({1, z.size(1), 1, 1}, z.dtype());
    m.data<float>()[head] = 0;
    return ag::mul(z, Var(m));
  };
  Tensor hooked;
  {
    HookScope scope(h);
    hooked = c.lm.forward(c.ids).data();
  }
  // The same head removed from the weights: W_O's columns that read head h.
  Tensor& w = c.lm.blocks->layers[layer]->self_attn->w_o->weight.data();  // (d, d)
  for (int64_t i = 0; i < w.size(0); ++i)
    for (int64_t j = head * dh; j < (head + 1) * dh; ++j) w.data<float>()[i * w.size(1) + j] = 0;
  CHECK(same_values(hooked, c.lm.forward(c.ids).data()));
}

TEST_CASE("hooks: a replacement's gradient flows (gradcheck in float64)") {
  // xi scales a head (Michel et al.'s mask variable) or each feature of the residual stream
  for (const char* point : {"blocks.0.attn.z", "blocks.0.attn.pattern", "blocks.1.resid_mid"}) {
    INFO(point);
    LmCase c;
    c.lm.to(DType::f64);
    const bool per_head = std::string(point).find("attn") != std::string::npos;
    Generator g(11);
    Var xi(add(randn(per_head ? Shape{1, 2, 1, 1} : Shape{1, 1, 8}, g, DType::f64), 1.0), true);
    xi.set_name("xi");
    Hooks h;
    h.replace[point] = [&](const Var& x) { return ag::mul(x, xi); };
    HookScope scope(h);
    check_gradients([&](const std::vector<Var>&) { return c.lm.forward(c.ids); }, {xi});
  }
}

TEST_CASE("hooks: an unknown hook name is one error naming the nearest points") {
  LmCase c;
  try {
    check_hook_names(c.lm, {"blocks.9.attn.z"}, "lens");
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("lens: no hook point 'blocks.9.attn.z'") != std::string::npos);
    CHECK(m.find("blocks.0.attn.z") != std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
  }
  CHECK_NOTHROW(check_hook_names(c.lm, {"blocks.1.attn.z", "*.pattern"}, "lens"));
  CHECK_THROWS_AS(check_hook_names(c.lm, {"*.cross.z"}, "lens"), Error);
}

TEST_CASE("hooks: a replacement of another shape is an error naming the hook point") {
  LmCase c;
  Hooks h;
  h.replace["blocks.0.resid_mid"] = [](const Var& x) { return ag::select(x, 1, 0); };
  HookScope scope(h);
  CHECK_THROWS_WITH(c.lm.forward(c.ids),
                    Catch::Contains("blocks.0.resid_mid") && Catch::Contains("shape"));
}

TEST_CASE("hooks: the key/value cache passes the same hook points, one position at a time") {
  LmCase c;
  Hooks h;
  h.capture = names_matching({"blocks.1.attn.pattern", "logits"});
  DecoderLM::Cache cache;
  {
    HookScope scope(h);
    c.lm.step(cache, from_vector<int64_t>({0, 3, 6}, {1, 3}));
    c.lm.step(cache, from_vector<int64_t>({3}, {1, 1}));
  }
  CHECK(h.cache.at("blocks.1.attn.pattern").shape() == Shape{1, 2, 1, 4});
  CHECK(h.cache.at("logits").shape() == Shape{1, 1, 7});
}

TEST_CASE("glob patterns match hook names") {
  CHECK(glob_match("*.attn.pattern", "blocks.0.attn.pattern"));
  CHECK(glob_match("blocks.*", "blocks.3.mlp.post"));
  CHECK(glob_match("*", "logits"));
  CHECK_FALSE(glob_match("*.attn.pattern", "blocks.0.cross.pattern"));
  CHECK_FALSE(glob_match("blocks.1*", "blocks.0.attn.z"));
  CHECK(glob_match("logits", "logits"));
}

namespace {

// A hook point's name with its layer as L and without the stack's prefix, as docs/hooks.md
// lists it: "decoder.blocks.1.cross.z" -> "blocks.L.cross.z".
std::string table_name(std::string n) {
  for (const char* p : {"encoder.", "decoder."})
    if (n.rfind(p, 0) == 0) n = n.substr(std::string(p).size());
  if (n.rfind("blocks.", 0) == 0) n = "blocks.L" + n.substr(n.find('.', 7));
  return n;
}

}  // namespace

TEST_CASE("hooks: docs/hooks.md lists exactly the hook points of every kind of model") {
  std::ifstream doc(source_path("docs/hooks.md"));
  REQUIRE(doc.good());
  std::set<std::string> documented, walked;
  for (std::string line; std::getline(doc, line);)
    if (line.rfind("| `", 0) == 0) documented.insert(line.substr(3, line.find('`', 3) - 3));
  LmCase lm;
  S2SCase s2s;
  for (const auto& n : hook_points(lm.lm)) walked.insert(table_name(n));
  for (const auto& n : hook_points(s2s.m)) walked.insert(table_name(n));
  Generator g(3);
  const EncoderClassifier classifier(tiny_config(false, true), g, Pooling::mean);
  for (const auto& n : hook_points(classifier)) walked.insert(table_name(n));
  CHECK(documented == walked);
  for (const auto& n : walked) CHECK(documented.count(n) == 1);
  for (const auto& n : documented) CHECK(walked.count(n) == 1);
}
