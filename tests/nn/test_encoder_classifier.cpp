// The encoder-only classifier (nn::EncoderClassifier): one class per sequence through Model's
// interface and its fused loss, what each pooling reads, padding and (without positions) order
// changing nothing, parameter names and initialisation, misuse, hook points in forward order,
// gradcheck in float64 of the pooled read-out with the classifier and of the whole model, and
// a bf16 step within bf16's tolerance of the fp32 one (its mean pooling in float32).
// Parity with PyTorch is test_encoder_classifier_reference.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "core/precision.hpp"
#include "nn/encoder_classifier.hpp"
#include "nn/hooks.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using Ins = const std::vector<Var>&;

namespace {

// 9 tokens, 3 classes, d_model 8, 2 heads, d_ff 12, 2 layers, no dropout.
ModelConfig tiny_classifier(bool norm_first = false,
                            PositionKind position = PositionKind::sinusoidal) {
  ModelConfig c;
  c.src_vocab = 9;
  c.tgt_vocab = 3;
  set_tiny_sizes(c);
  c.encoder_layers = 2;
  c.norm_first = norm_first;
  c.position = position;
  c.max_len = 16;
  return c;
}

EncoderClassifier make(const ModelConfig& c, Pooling pool, uint64_t seed = 7) {
  Generator g(seed);
  EncoderClassifier m(c, g, pool);
  m.eval();
  return m;
}

// A batch of three: lengths 6, 4 and 1, each starting with id 4 (the data's <cls>).
struct Batch {
  Tensor src = from_vector<int64_t>({4, 5, 6, 7, 8, 5, 4, 8, 8, 6, 0, 0, 4, 0, 0, 0, 0, 0}, {3, 6});
  Tensor valid = valid_mask({6, 4, 1}, 6);
  Tensor tgt_in = zeros({3, 1}, DType::i64);
  Tensor labels = from_vector<int64_t>({2, 0, 1}, {3, 1});
};

// Moves every parameter away from its initial value (zero biases, unit gains hide mistakes).
void perturb(Module& m, uint64_t seed, double scale = 0.3) {
  Generator g(seed);
  for (Var p : m.parameters()) p.data() = add(p.data(), mul(randn(p.shape(), g, p.dtype()), scale));
}

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("EncoderClassifier: logits (B, 1, C), and forward_loss is the mean cross-entropy") {
  for (Pooling pool : {Pooling::cls, Pooling::mean}) {
    INFO(name_of(pool));
    EncoderClassifier m = make(tiny_classifier(), pool);
    const Batch b;
    const Var logits = m.forward(b.src, b.tgt_in, b.valid, Tensor());
    CHECK(logits.shape() == Shape{3, 1, 3});
    CHECK(m.classes() == 3);
    CHECK(same_bits(m.classify(b.src, b.valid).data(), ag::select(logits, 1, 0).data()));
    // the fused output layer and loss (no hooks, no soft cap) against the two ops
    const Var loss = m.forward_loss(b.src, b.tgt_in, b.valid, Tensor(), b.labels, -100, 0.0);
    const Var ref = ag::cross_entropy(ag::reshape(logits, {3, 3}), b.labels.flatten());
    CHECK(same_bits(loss.data(), ref.data()));
    // by hand: the mean over the batch of -log softmax(logits)[label]
    const std::vector<float> z = to_vector<float>(logits.data().contiguous());
    double want = 0;
    for (int r = 0; r < 3; ++r) {
      double norm = 0;
      for (int k = 0; k < 3; ++k) norm += std::exp(double(z[r * 3 + k]));
      want -= double(z[r * 3 + b.labels.data<int64_t>()[r]]) - std::log(norm);
    }
    CHECK(loss.item() == Approx(want / 3).epsilon(1e-6));
    // the same gradients, and the same loss when hooks in scope take the unfused path
    std::vector<Var> params;
    for (const auto& [n, p] : m.named_parameters()) params.push_back(p);
    const auto fused = ag::grad({loss}, {ones(loss.shape())}, params);
    const auto two = ag::grad({ref}, {ones(ref.shape())}, params);
    for (size_t i = 0; i < params.size(); ++i) CHECK(same_bits(fused[i], two[i]));
    Hooks none;
    HookScope scope(none);
    CHECK(same_bits(m.forward_loss(b.src, b.tgt_in, b.valid, Tensor(), b.labels, -100, 0.0).data(),
                    loss.data()));
  }
}

TEST_CASE("EncoderClassifier: cls reads position 0, mean the mean over real positions") {
  for (bool norm_first : {false, true}) {
    const std::string last = norm_first ? "final_norm" : "blocks.1.resid_post";
    const Batch b;
    for (Pooling pool : {Pooling::cls, Pooling::mean}) {
      INFO(name_of(pool) << " norm_first " << norm_first);
      EncoderClassifier m = make(tiny_classifier(norm_first), pool);
      m.to(DType::f64);
      Hooks h;
      h.capture = names_matching({last, "pooled", "logits"});
      {
        HookScope scope(h);
        m.forward(b.src, b.tgt_in, b.valid, Tensor());
      }
      const Tensor hidden = h.cache.at(last).data(), pooled = h.cache.at("pooled").data();
      REQUIRE(pooled.shape() == Shape{3, 1, 8});
      const Tensor want =
          pool == Pooling::cls ? hidden.narrow(1, 0, 1) : build({3, 1, 8}, [&](const Shape& i) {
            const int64_t len[] = {6, 4, 1};
            double s = 0;
            for (int64_t p = 0; p < len[i[0]]; ++p) s += hidden.at({i[0], p, i[2]});
            return s / double(len[i[0]]);
          });
      CHECK(max_abs_diff(pooled, want) < 1e-14);
      // logits = classifier(pooled)
      CHECK(same_bits(h.cache.at("logits").data(), m.classifier->forward(Var(pooled)).data()));
    }
  }
}

TEST_CASE("EncoderClassifier: padding changes no logit, a row alone gives its row's logits") {
  for (Pooling pool : {Pooling::cls, Pooling::mean})
    for (bool norm_first : {false, true}) {
      INFO(name_of(pool) << " norm_first " << norm_first);
      EncoderClassifier m = make(tiny_classifier(norm_first), pool);
      m.to(DType::f64);
      const Batch b;
      const Tensor logits = m.classify(b.src, b.valid).data();  // (3, C)
      // three more padded positions, and other ids under the old padding
      Tensor longer = full({3, 9}, 3.0, DType::i64);
      longer.narrow(1, 0, 6).copy_(b.src);
      longer.data<int64_t>()[9 + 5] = 2;
      CHECK(max_abs_diff(m.classify(longer, valid_mask({6, 4, 1}, 9)).data(), logits) < 1e-13);
      const int64_t lengths[] = {6, 4, 1};
      for (int64_t r = 0; r < 3; ++r) {
        const Tensor alone = b.src.narrow(0, r, 1).narrow(1, 0, lengths[r]).contiguous();
        CHECK(max_abs_diff(m.classify(alone).data(), logits.narrow(0, r, 1)) < 1e-13);
      }
    }
}

TEST_CASE("EncoderClassifier: without positions mean pooling is blind to order, with them not") {
  const Tensor src = from_vector<int64_t>({5, 6, 7, 8, 6}, {1, 5});
  const Tensor shuffled = from_vector<int64_t>({8, 6, 5, 6, 7}, {1, 5});
  for (PositionKind p : {PositionKind::none, PositionKind::sinusoidal, PositionKind::rope}) {
    INFO(name_of(p));
    EncoderClassifier m = make(tiny_classifier(true, p), Pooling::mean);
    m.to(DType::f64);
    const double diff = max_abs_diff(m.classify(src).data(), m.classify(shuffled).data());
    if (p == PositionKind::none)
      CHECK(diff < 1e-13);
    else
      CHECK(diff > 1e-4);
  }
}

TEST_CASE("EncoderClassifier: every position kind and scorer, forward and backward") {
  const Batch b;
  for (PositionKind p : {PositionKind::sinusoidal, PositionKind::learned, PositionKind::relative,
                         PositionKind::rope, PositionKind::none})
    for (AttentionKind a : {AttentionKind::dot, AttentionKind::additive, AttentionKind::linear}) {
      ModelConfig c = tiny_classifier(true, p);
      c.attention = a;
      if (attention_conflict(a, p, 0, 0, 4, {})) continue;  // e.g. relative needs a bias
      INFO(name_of(p) << " " << name_of(a));
      const EncoderClassifier m = make(c, Pooling::mean);
      const Var loss = m.forward_loss(b.src, b.tgt_in, b.valid, Tensor(), b.labels, -100, 0.1);
      const auto grads = ag::grad({loss}, {ones(loss.shape())}, m.parameters());
      CHECK(std::isfinite(loss.item()));
      for (const Tensor& g : grads) CHECK(std::isfinite(max(abs(g)).item()));
    }
  // learned positions end at max_len (16)
  const EncoderClassifier m = make(tiny_classifier(false, PositionKind::learned), Pooling::cls);
  CHECK(m.max_positions() == 16);
  CHECK_NOTHROW(m.classify(full({1, 16}, 5.0, DType::i64)));
  CHECK_THROWS_WITH(m.classify(full({1, 17}, 5.0, DType::i64)), Catch::Contains("max_len 16"));
  CHECK(make(tiny_classifier(), Pooling::cls).max_positions() > int64_t(1) << 40);
}

TEST_CASE("EncoderClassifier: parameter names, Seq2Seq's encoder initialisation, seeded") {
  ModelConfig c = tiny_classifier(true, PositionKind::learned);
  c.d_model = 64, c.heads = 4, c.src_vocab = 100;
  const EncoderClassifier m = make(c, Pooling::cls);
  const auto names = names_of(m);
  for (const char* n :
       {"embed.weight", "pos.weight", "blocks.layers.0.self_attn.w_q.weight",
        "blocks.layers.1.self_attn.w_o.bias", "blocks.layers.1.ffn.linear2.weight",
        "blocks.layers.0.norm2.bias", "blocks.norm.weight", "classifier.weight", "classifier.bias"})
    CHECK(has(names, n));
  CHECK_FALSE(has(names, "blocks.layers.2.norm1.weight"));
  CHECK(m.pos->table.shape() == Shape{16, 64});
  CHECK(m.classifier->weight.shape() == Shape{3, 64});
  // a checkpoint names them alike (no scope)
  std::vector<std::string> saved;
  for (const auto& [n, p] : m.checkpoint_parameters()) saved.push_back(n);
  CHECK(saved == names);
  // Xavier-uniform classifier, zero bias; scaled embedding ~ N(0, 1/d)
  const double a = std::sqrt(6.0 / (64 + 3));
  const double w = max(abs(m.classifier->weight.data())).item();
  CHECK(w <= a);
  CHECK(w > 0.8 * a);
  CHECK(max(abs(m.classifier->bias.data())).item() == 0);
  const Tensor e = m.embed->weight.data().to(DType::f64);
  CHECK(std::sqrt(mean(mul(e, e)).item()) == Approx(1.0 / 8).epsilon(0.05));
  // post-LN without final_norm has no final norm; the same seed draws the same weights
  CHECK_FALSE(has(names_of(make(tiny_classifier(false), Pooling::cls)), "blocks.norm.weight"));
  const auto s1 = make(c, Pooling::mean, 3).state_dict(),
             s2 = make(c, Pooling::mean, 3).state_dict();
  REQUIRE(s1.size() == s2.size());
  for (size_t i = 0; i < s1.size(); ++i) CHECK(same_bits(s1[i].second, s2[i].second));
}

TEST_CASE("EncoderClassifier: misuse is one error naming the key or the shapes") {
  auto with = [](auto change) {
    ModelConfig c = tiny_classifier();
    change(c);
    Generator g(1);
    return EncoderClassifier(c, g);
  };
  CHECK_THROWS_WITH(with([](ModelConfig& c) { c.tgt_vocab = 1; }),
                    Catch::Contains("model.tgt_vocab") && Catch::Contains("2 classes"));
  CHECK_THROWS_WITH(with([](ModelConfig& c) { c.encoder_layers = 0; }),
                    Catch::Contains("model.encoder_layers"));
  CHECK_THROWS_WITH(with([](ModelConfig& c) { c.tie_output = true; }),
                    Catch::Contains("model.tie_output"));
  CHECK_THROWS_WITH(with([](ModelConfig& c) { c.share_embeddings = true; }),
                    Catch::Contains("model.share_embeddings"));
  CHECK_THROWS_WITH(parse_pooling("max"), Catch::Contains("pool: must be cls or mean"));
  CHECK(parse_pooling("mean") == Pooling::mean);

  const Batch b;
  const EncoderClassifier cls = make(tiny_classifier(), Pooling::cls);
  const EncoderClassifier mean = make(tiny_classifier(), Pooling::mean);
  CHECK_THROWS_WITH(cls.forward(b.src, zeros({3, 2}, DType::i64), b.valid, Tensor()),
                    Catch::Contains("tgt_in must be (B, 1)"));
  CHECK_THROWS_WITH(cls.classify(b.src.flatten()), Catch::Contains("src must be (B, S) int64"));
  CHECK_THROWS_WITH(cls.classify(b.src, valid_mask({6, 4}, 6)), Catch::Contains("src_valid"));
  Tensor first_padded = b.valid.clone();
  first_padded.data<uint8_t>()[6] = 0;  // row 1, position 0
  CHECK_THROWS_WITH(cls.classify(b.src, first_padded),
                    Catch::Contains("position 0") && Catch::Contains("row 1"));
  CHECK_THROWS_WITH(mean.classify(b.src, valid_mask({6, 0, 1}, 6)),
                    Catch::Contains("row 1") && Catch::Contains("no real position"));
  CHECK_NOTHROW(mean.classify(b.src, first_padded));  // the mean needs no position 0
}

TEST_CASE("EncoderClassifier: hook points in forward order, as hook_points lists them") {
  struct Layout {
    bool norm_first, final_norm, attn_only;
  };
  for (const Layout l :
       {Layout{false, false, false}, Layout{true, false, false}, Layout{false, true, false},
        Layout{false, false, true}, Layout{true, true, true}})
    for (Pooling pool : {Pooling::cls, Pooling::mean}) {
      INFO("norm_first " << l.norm_first << " final_norm " << l.final_norm << " attn_only "
                         << l.attn_only << " " << name_of(pool));
      ModelConfig c = tiny_classifier(l.norm_first);
      c.final_norm = l.final_norm, c.attn_only = l.attn_only;
      const EncoderClassifier m = make(c, pool);
      const std::vector<std::string> names = hook_points(m);
      Hooks trace;  // a forward pass reaches exactly these, in this order
      trace.capture = [](std::string_view) { return true; };
      {
        const Batch b;
        HookScope scope(trace);
        m.forward(b.src, b.tgt_in, b.valid, Tensor());
      }
      CHECK(trace.passed == names);
      CHECK(names.front() == "embed");
      CHECK(names[names.size() - 2] == "pooled");
      CHECK(names.back() == "logits");
      CHECK(has(names, "final_norm") == (l.norm_first || l.final_norm));
      CHECK(has(names, "blocks.1.mlp_out") == !l.attn_only);
      for (const char* n : {"blocks.0.resid_pre", "blocks.0.attn.pattern", "blocks.0.attn.z",
                            "blocks.1.attn_out", "blocks.1.resid_post"})
        CHECK(has(names, n));
      CHECK_FALSE(has(names, "blocks.2.resid_pre"));
    }
  // every point captured in a real batch, with its documented shape
  const EncoderClassifier m = make(tiny_classifier(true), Pooling::mean);
  const Batch b;
  Hooks h;
  h.capture = [](std::string_view) { return true; };
  {
    HookScope scope(h);
    m.forward(b.src, b.tgt_in, b.valid, Tensor());
  }
  const std::vector<std::string> names = hook_points(m);
  CHECK(h.passed == names);
  CHECK(h.cache.size() == names.size());
  CHECK(h.cache.at("embed").shape() == Shape{3, 6, 8});
  CHECK(h.cache.at("blocks.0.attn.pattern").shape() == Shape{3, 2, 6, 6});
  CHECK(h.cache.at("blocks.1.mlp.post").shape() == Shape{3, 6, 12});
  CHECK(h.cache.at("final_norm").shape() == Shape{3, 6, 8});
  CHECK(h.cache.at("pooled").shape() == Shape{3, 1, 8});
  CHECK(h.cache.at("logits").shape() == Shape{3, 1, 3});
}

TEST_CASE("EncoderClassifier: attention patterns through hooks, padded keys get nothing") {
  const EncoderClassifier m = make(tiny_classifier(), Pooling::cls);
  const Batch b;
  Hooks h;
  h.capture = names_matching({"*.pattern"});
  {
    HookScope scope(h);
    m.forward(b.src, b.tgt_in, b.valid, Tensor());
  }
  REQUIRE(h.cache.size() == 2);  // self-attention of its two blocks, nothing else
  const Tensor w = h.cache.at("blocks.1.attn.pattern").data();
  CHECK(w.shape() == Shape{3, 2, 6, 6});
  // row 1 has 4 real tokens: keys 4 and 5 get no weight; every query row sums to 1
  CHECK(max(abs(w.select(0, 1).narrow(-1, 4, 2))).item() == 0);
  CHECK(max_abs_diff(sum(w.to(DType::f64), {-1}), ones({3, 2, 6}, DType::f64)) < 1e-6);
}

TEST_CASE("gradcheck: the pooled read-out and classifier, both poolings, with padding") {
  for (Pooling pool : {Pooling::cls, Pooling::mean})
    for (bool padded : {true, false}) {
      INFO(name_of(pool) << " padded " << padded);
      EncoderClassifier m = make(tiny_classifier(), pool);
      m.to(DType::f64);
      perturb(*m.classifier, 2);
      Generator g(4);
      const Var h = leaf({3, 5, 8}, g);
      const Tensor valid = padded ? valid_mask({5, 3, 1}, 5) : Tensor();
      check_gradients([&](Ins in) { return m.classifier->forward(m.pool(in[0], valid)); },
                      with_params({h}, *m.classifier));
      // only what the pooling reads gets a gradient: position 0 (cls), real positions (mean)
      const Tensor dh = ag::grad({m.pool(h, valid)}, {ones({3, 1, 8}, DType::f64)}, {h})[0];
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t p = 0; p < 5; ++p) {
          const bool real = !padded || p < (r == 0 ? 5 : r == 1 ? 3 : 1);
          const bool read = pool == Pooling::cls ? p == 0 : real;
          CHECK((max(abs(dh.select(0, r).select(0, p))).item() > 0) == read);
        }
    }
}

TEST_CASE("gradcheck: the whole small classifier in float64, and its loss") {
  struct Case {
    bool norm_first;
    Pooling pool;
    PositionKind position;
  };
  const Batch b;
  for (const Case k : {Case{false, Pooling::cls, PositionKind::sinusoidal},
                       Case{true, Pooling::mean, PositionKind::learned},
                       Case{true, Pooling::cls, PositionKind::rope},
                       Case{false, Pooling::mean, PositionKind::relative}}) {
    INFO("norm_first " << k.norm_first << " " << name_of(k.pool) << " " << name_of(k.position));
    EncoderClassifier m = make(tiny_classifier(k.norm_first, k.position), k.pool);
    m.to(DType::f64);
    perturb(m, 5);
    check_gradients([&](Ins) { return m.forward(b.src, b.tgt_in, b.valid, Tensor()); },
                    with_params({}, m));
  }
  EncoderClassifier m = make(tiny_classifier(true), Pooling::mean);
  m.to(DType::f64);
  perturb(m, 6);
  check_gradients(
      [&](Ins) { return m.forward_loss(b.src, b.tgt_in, b.valid, Tensor(), b.labels, -100, 0.1); },
      with_params({}, m));
}

TEST_CASE("EncoderClassifier: a bf16 step is within bf16's tolerance, its mean pooling exact") {
  SKIP_WITHOUT_BF16();
  // 16 sequences of 40 down to 10 tokens, GELU: the gradients average over several examples
  ModelConfig c = tiny_classifier(true);
  c.d_model = 64, c.heads = 4, c.d_ff = 128, c.src_vocab = 30, c.activation = Activation::gelu;
  EncoderClassifier m = make(c, Pooling::mean);
  Generator g(8);
  std::vector<int64_t> lengths;
  for (int64_t r = 0; r < 16; ++r) lengths.push_back(40 - 2 * r);
  const Tensor src = randint({16, 40}, 0, 30, g), valid = valid_mask(lengths, 40);
  const Tensor tgt_in = zeros({16, 1}, DType::i64), labels = randint({16, 1}, 0, 3, g);
  auto step = [&](Precision p, Hooks* h) {
    PrecisionScope scope(p);
    std::optional<HookScope> hooked;
    if (h) hooked.emplace(*h);
    const Var loss = m.forward_loss(src, tgt_in, valid, Tensor(), labels, -100, 0.0);
    return std::make_pair(loss.data(), ag::grad({loss}, {ones(loss.shape())}, m.parameters()));
  };
  const auto [fp32, fp32_grads] = step(Precision::fp32, nullptr);
  const auto [bf16, bf16_grads] = step(Precision::bf16, nullptr);
  CHECK(rel_err(bf16, fp32) <= 1e-2);
  CHECK_FALSE(same_bits(bf16, fp32));  // the products did run in bf16
  const auto named = m.named_parameters();
  double worst = 0;
  for (size_t i = 0; i < fp32_grads.size(); ++i) {
    INFO(named[i].first);
    if (named[i].first.find("w_k.bias") != std::string::npos) {  // zero but for rounding
      CHECK(max(abs(bf16_grads[i])).item() < 1e-3);
      continue;
    }
    worst = std::max(worst, rel_err(bf16_grads[i], fp32_grads[i]));
    CHECK(rel_err(bf16_grads[i], fp32_grads[i]) <= 2e-2);  // as the decoder-only step
  }
  std::printf("encoder classifier bf16 step: loss err %.3g, worst gradient err %.3g\n",
              rel_err(bf16, fp32), worst);
  // the mean over real positions is float32 arithmetic, not a bf16 product
  Hooks h;
  h.capture = names_matching({"final_norm", "pooled"});
  step(Precision::bf16, &h);
  const Tensor hidden = h.cache.at("final_norm").data().to(DType::f64);
  const Tensor want = build({16, 1, 64}, [&](const Shape& i) {
    const int64_t len = lengths[static_cast<size_t>(i[0])];
    double s = 0;
    for (int64_t p = 0; p < len; ++p) s += hidden.at({i[0], p, i[2]});
    return s / double(len);
  });
  CHECK(max_abs_diff(h.cache.at("pooled").data().to(DType::f64), want) < 1e-6);
}
