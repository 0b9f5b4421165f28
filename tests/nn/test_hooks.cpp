// Named hook points (nn/hooks.hpp): the names each model passes, capture, replace, gradients
// through a replacement, and hooks that change nothing when they change nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "core/parallel.hpp"
#include "nn/encoder_classifier.hpp"
#include "nn/hooks.hpp"
#include "nn/rnn_seq2seq.hpp"
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

TEST_CASE("hooks: the captured patterns are the attention weights of the captured q and k") {
  S2SCase c;
  Hooks h;
  h.capture = names_matching({"*.q", "*.k", "*.v", "*.pattern"});
  {
    HookScope scope(h);
    c.run();
  }
  // softmax(q k^T / sqrt(d_head)) under each attention's mask, from the q, k and v that flowed
  // on: the same computation, so the same bits, in every layer.
  const Tensor src_keys = key_padding_mask(c.sv), tgt_keys = key_padding_mask(c.tv);
  const Tensor causal = combine_masks(causal_mask(3), tgt_keys);
  const auto weights = [&](const std::string& at, const Tensor& mask) {
    Var w;
    scaled_dot_product_attention(h.cache.at(at + "q"), h.cache.at(at + "k"), h.cache.at(at + "v"),
                                 mask, {}, &w);
    return w.data();
  };
  for (const auto& [at, mask] :
       std::vector<std::pair<std::string, Tensor>>{{"encoder.blocks.0.attn.", src_keys},
                                                   {"decoder.blocks.0.attn.", causal},
                                                   {"decoder.blocks.1.attn.", causal},
                                                   {"decoder.blocks.1.cross.", src_keys}}) {
    INFO(at);
    CHECK(same_values(h.cache.at(at + "pattern").data(), weights(at, mask)));
  }
}

TEST_CASE("hooks: capturing everything and identity replacements change no bit of the output") {
  for (bool norm_first : {false, true}) {
    S2SCase c(norm_first);
    const Tensor plain = c.run().data();
    Hooks h;
    h.capture = [](std::string_view) { return true; };
    for (const std::string& n : hook_points(c.m))
      if (n.find("pattern") == std::string::npos)  // a replaced pattern takes the dense path
        h.add(n, [](const Var& x) { return x; });
    HookScope scope(h);
    CHECK(same_values(c.run().data(), plain));
  }
}

TEST_CASE("hooks: zeroing a head's z equals zeroing its slice of W_O's input") {
  LmCase c;
  const int64_t layer = 1, head = 1, dh = 4;
  Hooks h;
  h.add("blocks.1.attn.z", [&](const Var& z) {  // z: (B, h, n, d_head)
    Tensor m = ones({1, z.size(1), 1, 1}, z.dtype());
    m.data<float>()[head] = 0;
    return ag::mul(z, Var(m));
  });
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
    h.add(point, [&](const Var& x) { return ag::mul(x, xi); });
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
  h.add("blocks.0.resid_mid", [](const Var& x) { return ag::select(x, 1, 0); });
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
// lists it: "decoder.blocks.1.cross.z" -> "blocks.L.cross.z", "encoder.rnn.0.h" -> "rnn.L.h".
std::string table_name(std::string n) {
  for (const char* p : {"encoder.", "decoder."})
    if (n.rfind(p, 0) == 0) n = n.substr(std::string(p).size());
  for (const std::string stack : {"blocks.", "rnn.", "conv."})
    if (n.rfind(stack, 0) == 0) n = stack + "L" + n.substr(n.find('.', stack.size()));
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
  for (EncoderKind kind : {EncoderKind::gru, EncoderKind::lstm, EncoderKind::conv}) {
    ModelConfig c = tiny_config(false);
    c.encoder = kind;
    Generator g(4);
    const Seq2Seq m(c, g);
    for (const auto& n : hook_points(m)) walked.insert(table_name(n));
  }
  for (bool attend : {true, false}) {  // the recurrent decoders
    Generator g(4);
    for (const auto& n : hook_points(*make_encoder_decoder(tiny_rnn_config(attend), g)))
      walked.insert(table_name(n));
  }
  Generator g(3);
  const EncoderClassifier classifier(tiny_config(false, true), g, Pooling::mean);
  for (const auto& n : hook_points(classifier)) walked.insert(table_name(n));
  CHECK(documented == walked);
  for (const auto& n : walked) CHECK(documented.count(n) == 1);
  for (const auto& n : documented) CHECK(walked.count(n) == 1);
}

// ------------------------------------------------------------------ hooks as a stack

TEST_CASE("hooks: nested scopes compose, the outer layer first, each layer's list in order") {
  LmCase c;
  const std::string point = "blocks.0.attn_out";
  Hooks plain;
  plain.capture = names_matching({point});
  {
    HookScope scope(plain);
    c.lm.forward(c.ids);
  }
  const Tensor x = plain.cache.at(point).data();
  std::vector<std::string> order;
  Hooks outer, inner;
  outer.add(point, [&](const Var& v) {
    order.push_back("outer");
    return ag::mul(v, 2.0);
  });
  inner
      .add(point,
           [&](const Var& v) {
             order.push_back("inner, first");
             return ag::add(v, 1.0);
           })
      .add(point, [&](const Var& v) {
        order.push_back("inner, second");
        return ag::mul(v, 3.0);
      });
  inner.capture = names_matching({point});
  Tensor nested;
  {
    HookScope o(outer);
    {
      HookScope i(inner);
      nested = c.lm.forward(c.ids).data();
    }
    CHECK(order == std::vector<std::string>{"outer", "inner, first", "inner, second"});
    // (2 x + 1) 3, not 2 (x + 1) 3 or 2 (3 x + 1): the order is the stack's
    CHECK(same_values(inner.cache.at(point).data(), mul(add(mul(x, 2.0), 1.0), 3.0)));
    // the inner scope ended: the outer layer alone
    order.clear();
    outer.capture = names_matching({point});
    c.lm.forward(c.ids);
    CHECK(order == std::vector<std::string>{"outer"});
    CHECK(same_values(outer.cache.at(point).data(), mul(x, 2.0)));
  }
  CHECK_FALSE(hooks_active());
  // The same three replacements as one layer's list: the same bits.
  Hooks one;
  one.add(point, [](const Var& v) { return ag::mul(v, 2.0); })
      .add(point, [](const Var& v) { return ag::add(v, 1.0); })
      .add(point, [](const Var& v) { return ag::mul(v, 3.0); });
  HookScope scope(one);
  CHECK(same_values(c.lm.forward(c.ids).data(), nested));
}

TEST_CASE("hooks: a capture goes to the layer that asked, holding the value after every layer") {
  LmCase c;
  Hooks plain;
  plain.capture = names_matching({"blocks.0.resid_pre"});
  {
    HookScope scope(plain);
    c.lm.forward(c.ids);
  }
  Hooks outer, inner;
  outer.capture = names_matching({"blocks.0.*"});
  inner.capture = names_matching({"logits"});
  inner.add("blocks.0.resid_pre", [](const Var& v) { return ag::mul(v, 0.5); });
  Var logits;
  {
    HookScope o(outer);
    HookScope i(inner);
    logits = c.lm.forward(c.ids);
  }
  CHECK(outer.cache.count("logits") == 0);
  CHECK(inner.cache.size() == 1);
  CHECK(same_values(inner.cache.at("logits").data(), logits.data()));
  CHECK(outer.cache.count("blocks.0.attn.pattern") == 1);
  CHECK(named_with(outer.passed, "logits").size() == 1);  // passed, though not captured
  // the outer layer holds what flowed on: the inner layer's replacement applied
  CHECK(same_values(outer.cache.at("blocks.0.resid_pre").data(),
                    mul(plain.cache.at("blocks.0.resid_pre").data(), 0.5)));
  // every layer passed every point, in the order of hook_points
  CHECK(outer.passed == hook_points(c.lm));
  CHECK(inner.passed == hook_points(c.lm));
  // a layer whose scope ended receives nothing more
  inner.cache.clear();
  {
    HookScope o(outer);
    c.lm.forward(c.ids);
  }
  CHECK(inner.cache.empty());
}

TEST_CASE("hook points: listed without a forward pass, in the order a pass reaches them") {
  ModelConfig attn_only_lm = tiny_lm(), post_ln_lm = tiny_lm();
  attn_only_lm.attn_only = true;
  post_ln_lm.norm_first = false;
  post_ln_lm.final_norm = false;
  ModelConfig attn_only_s2s = tiny_config(true, true);
  attn_only_s2s.attn_only = true;
  std::vector<std::pair<std::string, std::shared_ptr<Model>>> models;
  for (const auto& [name, config] :
       {std::pair{"lm", tiny_lm()}, std::pair{"lm, attention only", attn_only_lm},
        std::pair{"lm, post-LN without a final norm", post_ln_lm}}) {
    Generator g(5);
    models.emplace_back(name, std::make_shared<DecoderLM>(config, g));
  }
  for (const auto& [name, config] :
       {std::pair{"seq2seq, post-LN", tiny_config(false)},
        std::pair{"seq2seq, post-LN, final norm", tiny_config(false, true)},
        std::pair{"seq2seq, pre-LN", tiny_config(true)},
        std::pair{"seq2seq, attention only", attn_only_s2s}}) {
    Generator g(7);
    models.emplace_back(name, std::make_shared<Seq2Seq>(config, g));
  }
  for (bool attend : {true, false}) {
    Generator g(7);
    models.emplace_back(attend ? "gru, additive attention" : "gru, fixed context",
                        make_encoder_decoder(tiny_rnn_config(attend), g));
  }
  for (const Pooling pool : {Pooling::cls, Pooling::mean}) {
    Generator g(3);
    models.emplace_back(std::string("encoder classifier, ") + std::string(name_of(pool)),
                        std::make_shared<EncoderClassifier>(tiny_config(false, true), g, pool));
  }
  const Tensor src = from_vector<int64_t>({1, 4, 6, 2}, {1, 4}),
               tgt = from_vector<int64_t>({1, 2, 3}, {1, 3});
  const Tensor sv = ones({1, 4}, DType::b8), tv = ones({1, 3}, DType::b8);
  for (const auto& [name, model] : models) {
    INFO(name);
    // a classifier's decoder input is one position per row, its values unused
    const bool one_step = dynamic_cast<const EncoderClassifier*>(model.get()) != nullptr;
    model->eval();
    // A layer that captures everything sees no hook point while the model lists them and
    // checks names against them: no pass runs (any pass reaches "embed" first).
    Hooks watch;
    watch.capture = [](std::string_view) { return true; };
    std::vector<std::string> listed;
    {
      HookScope scope(watch);
      listed = hook_points(*model);
      // a model without attention (a fixed-context recurrent decoder) has no pattern
      check_hook_names(*model,
                       model->attention_sites().empty()
                           ? std::vector<std::string>{"logits"}
                           : std::vector<std::string>{"*.pattern", "logits"},
                       "test");
    }
    CHECK(watch.passed.empty());
    CHECK(watch.cache.empty());
    // ... and the list is the names a pass reaches, in its order
    Hooks trace;
    trace.capture = [](std::string_view) { return true; };
    {
      HookScope scope(trace);
      model->forward(src, one_step ? zeros({1, 1}, DType::i64) : tgt, sv, tv);
    }
    CHECK(listed == trace.passed);
  }
}

namespace {

// One thread's question to a shared model: its own ablation (an outer layer zeroing one head
// of one decoder self-attention layer) and its own captures (an inner layer), then a teacher-
// forced pass of the encoder-decoder and a few tokens of the language model through its cache.
struct Answer {
  Tensor logits, cross_pattern, lm_steps;
};

Answer ask(const Seq2Seq& s2s, const DecoderLM& lm, const Tensor& src, const Tensor& tgt, int who) {
  ag::NoGrad no_grad;                 // as an inference call: no tape,
  ThreadInvariantProducts invariant;  // products of the same bits at any thread count
  const int64_t layer = who % 2, head = (who / 2) % 4;
  const auto zero_head = [head](const Var& z) {  // z: (B, h, n, d_head)
    Tensor keep = ones({1, z.size(1), 1, 1}, z.dtype());
    keep.data<float>()[head] = 0;
    return ag::mul(z, Var(keep));
  };
  Hooks ablation, capture;
  ablation.add("decoder.blocks." + std::to_string(layer) + ".attn.z", zero_head);
  ablation.add("blocks." + std::to_string(layer) + ".attn.z", zero_head);
  capture.capture = names_matching({"decoder.blocks.1.cross.pattern"});
  HookScope outer(ablation);
  HookScope inner(capture);
  Answer a;
  const Tensor sv = ones(src.shape(), DType::b8), tv = ones(tgt.shape(), DType::b8);
  a.logits = s2s.forward(src, tgt, sv, tv).data();
  a.cross_pattern = capture.cache.at("decoder.blocks.1.cross.pattern").data();
  DecoderLM::Cache cache;  // each thread's own
  std::vector<Tensor> steps{lm.step(cache, tgt).data()};
  for (int t = 0; t < 4; ++t) steps.push_back(lm.step(cache, tgt.narrow(1, t, 1)).data());
  a.lm_steps = concat(steps, 1);
  return a;
}

bool same_answer(const Answer& a, const Answer& b) {
  return same_values(a.logits, b.logits) && same_values(a.cross_pattern, b.cross_pattern) &&
         same_values(a.lm_steps, b.lm_steps);
}

}  // namespace

TEST_CASE("hooks: threads with scopes of their own on one shared model answer bit for bit") {
  ModelConfig c = tiny_config(true, true), lc = tiny_lm();
  for (ModelConfig* m : {&c, &lc}) {
    m->d_model = 64, m->heads = 4, m->d_ff = 128, m->encoder_layers = 2, m->decoder_layers = 2;
    m->src_vocab = m->tgt_vocab = 7;
  }
  Generator g(3);
  Seq2Seq s2s(c, g);
  DecoderLM lm(lc, g);
  s2s.eval();  // once, before the threads: their passes write no flag (no InferenceScope)
  lm.eval();
  const Tensor src = randint({4, 16}, 0, 7, g), tgt = randint({4, 12}, 0, 7, g);
  constexpr int kThreads = 8, kRounds = 5;
  // Alone: each question on a thread of its own, one at a time.
  std::vector<Answer> alone(kThreads);
  for (int who = 0; who < kThreads; ++who)
    std::thread([&, who] { alone[who] = ask(s2s, lm, src, tgt, who); }).join();
  CHECK_FALSE(same_values(alone[0].logits, alone[1].logits));  // the ablations differ
  // Together: every thread asks its question several times while the others ask theirs.
  std::vector<std::vector<Answer>> together(kThreads);
  std::vector<std::thread> threads;
  for (int who = 0; who < kThreads; ++who)
    threads.emplace_back([&, who] {
      for (int r = 0; r < kRounds; ++r) together[who].push_back(ask(s2s, lm, src, tgt, who));
    });
  for (std::thread& t : threads) t.join();
  for (int who = 0; who < kThreads; ++who)
    for (int r = 0; r < kRounds; ++r) {
      INFO("thread " << who << ", round " << r);
      CHECK(same_answer(together[who][r], alone[who]));
    }
  CHECK_FALSE(hooks_active());  // the threads' scopes never reached this one
}
