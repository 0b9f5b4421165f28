// The fused attention path inside nn: same results as the reference path (taken when the
// pattern hook point is replaced: the output is pattern @ v), training steps that repeat bit
// for bit, and pre-LN stacks whose adds run fused with the norms after them.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <optional>

#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/hooks.hpp"
#include "nn/seq2seq.hpp"
#include "optim/optimizers.hpp"

using namespace qkv;
using namespace qkv::nn;

TEST_CASE("MultiHeadAttention: fused path equals the weights path, values and gradients") {
  Generator g(31);
  MultiHeadAttention mha(32, 4, g);
  const Tensor x = randn({3, 7, 32}, g), mem = randn({3, 5, 32}, g), go = randn({3, 7, 32}, g);
  // Batch entry 2 has no valid key: its rows must be zero with zero, finite gradients.
  Tensor valid = ones({3, 5}, DType::b8);
  valid.select(0, 2).zero_();
  valid.select(0, 0).narrow(0, 3, 2).zero_();
  const Tensor mask = key_padding_mask(valid);
  std::vector<Tensor> grads[2];
  Tensor outs[2];
  for (int with_weights = 0; with_weights < 2; ++with_weights) {
    mha.zero_grad();
    const Var q(x, true), kv(mem, true);
    Hooks through_weights;  // the pattern replaced by itself: the weights path
    through_weights.add("attn.pattern", [](const Var& w) { return w; });
    std::optional<HookScope> scope;
    if (with_weights) scope.emplace(through_weights);
    const Var y = mha.forward(q, kv, kv, mask);
    y.backward(go);
    outs[with_weights] = y.data();
    grads[with_weights] = {q.grad(), kv.grad(), mha.w_q->weight.grad(), mha.w_k->weight.grad()};
  }
  CHECK(max_abs_diff(outs[0], outs[1]) < 1e-5);
  for (size_t i = 0; i < grads[0].size(); ++i) {
    INFO("gradient " << i);
    CHECK(max_abs_diff(grads[0][i], grads[1][i]) < 1e-5);
    CHECK(all_finite(grads[0][i]));
  }
  // Entry 2's output is the output projection's bias alone; its queries get no gradient.
  CHECK(max_abs_diff(grads[0][0].select(0, 2), zeros({7, 32})) == 0);
}

TEST_CASE("Seq2Seq training steps repeat bit for bit at a fixed thread count") {
  const int saved = get_num_threads();
  set_num_threads(2);
  auto run = [] {
    Generator g(5);
    ModelConfig c;
    c.src_vocab = c.tgt_vocab = 11;
    c.d_model = 32;
    c.heads = 4;
    c.d_ff = 64;
    c.dropout = 0;
    Seq2Seq model(c, g);
    optim::OptimConfig oc;
    oc.name = qkv::optim::OptimizerKind::adam;
    auto opt = optim::make_optimizer(oc, model.named_parameters());
    const Tensor src = randint({8, 40}, 0, 11, g), tgt = randint({8, 40}, 0, 11, g);
    const Tensor out = randint({8 * 40}, 0, 11, g);
    Tensor valid = ones({8, 40}, DType::b8);
    valid.narrow(1, 30, 10).zero_();
    for (int step = 0; step < 2; ++step) {
      opt->zero_grad();
      const Var logits = model.forward(src, tgt, valid, valid);
      ag::cross_entropy(ag::reshape(logits, {8 * 40, 11}), out).backward();
      opt->step();
    }
    return model.named_parameters();
  };
  const auto a = run(), b = run();
  set_num_threads(saved);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(max_abs_diff(a[i].second.data(), b[i].second.data()) == 0);
  }
}

namespace {

// One forward and backward of a model's loss, in precision p, with an empty HookScope around
// it or not: with hooks in scope the pre-LN blocks add and normalise op by op (hook points sit
// between), without they fuse each add with the norm after it, within and across blocks.
// Returns the loss and every parameter's gradient.
std::vector<Tensor> loss_and_grads(Module& m, const std::function<Var()>& loss, Precision p,
                                   bool hooks) {
  m.zero_grad();
  Hooks none;
  std::optional<HookScope> scope;
  if (hooks) scope.emplace(none);
  PrecisionScope precision(p);
  const Var l = loss();
  l.backward();
  std::vector<Tensor> out = {l.data()};
  for (const auto& [name, v] : m.named_parameters()) out.push_back(v.grad());
  return out;
}

}  // namespace

TEST_CASE("pre-LN stacks: adds fused with the norms after them change no bit, float32 and bf16") {
  const int saved = get_num_threads();
  set_num_threads(2);
  for (const Precision p : {Precision::fp32, Precision::bf16}) {
    if (p == Precision::bf16 && !bf16_unsupported_reason().empty()) continue;
    for (const NormKind norm : {NormKind::layernorm, NormKind::rmsnorm})
      for (const bool lm : {true, false}) {
        INFO(precision_name(p) << (norm == NormKind::rmsnorm ? ", rmsnorm" : ", layernorm")
                               << (lm ? ", decoder-only LM" : ", encoder-decoder"));
        ModelConfig c = lm ? ModelConfig::decoder_defaults() : ModelConfig();
        c.src_vocab = c.tgt_vocab = 11;
        c.d_model = 32, c.heads = 4, c.d_ff = 64, c.dropout = 0, c.max_len = 40;
        c.encoder_layers = 2, c.decoder_layers = 2;
        c.norm_first = true, c.final_norm = true, c.norm = norm;
        Generator g(9);
        const Tensor src = randint({6, 40}, 0, 11, g), tgt = randint({6, 40}, 0, 11, g);
        const Tensor out = randint({6 * 40}, 0, 11, g);
        const Tensor valid = ones({6, 40}, DType::b8);
        std::unique_ptr<Model> model;
        if (lm)
          model = std::make_unique<DecoderLM>(c, g);
        else
          model = std::make_unique<Seq2Seq>(c, g);
        auto loss = [&] {
          return model->forward_loss(lm ? Tensor() : src, tgt, lm ? Tensor() : valid,
                                     lm ? Tensor() : valid, out, -100, 0.0);
        };
        const auto fused = loss_and_grads(*model, loss, p, false);
        const auto composed = loss_and_grads(*model, loss, p, true);
        REQUIRE(fused.size() == composed.size());
        for (size_t i = 0; i < fused.size(); ++i) {
          INFO("tensor " << i);
          CHECK(max_abs_diff(fused[i], composed[i]) == 0);
        }
      }
  }
  set_num_threads(saved);
}
