// The decoder-only language model (nn::DecoderLM, model.kind = "decoder"): gradcheck in
// float64, GPT-2 initialisation, causality, and the key/value cache against the full forward
// for every position kind and attention variant. Parity with PyTorch is in
// test_torch_parity.cpp (cases gpt_*).
#include <catch2/catch.hpp>

#include <cmath>

#include "nn/decoder_lm.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using Ins = const std::vector<Var>&;

namespace {

double std_of(const Tensor& t) {
  const Tensor x = t.to(DType::f64);
  const double m = mean(x).item();
  return std::sqrt(mean(mul(add(x, -m), add(x, -m))).item());
}

}  // namespace

TEST_CASE("DecoderLM gradcheck in float64, pre-LN and post-LN, biases on and off") {
  for (bool norm_first : {true, false})
    for (bool bias : {true, false}) {
      INFO("norm_first " << norm_first << " bias " << bias);
      Generator g(3);
      ModelConfig c = tiny_lm();
      c.norm_first = norm_first, c.final_norm = true, c.bias = bias;
      c.d_model = 6, c.d_ff = 10, c.max_len = 5;
      DecoderLM lm(c, g, std::make_shared<Generator>(1));
      lm.to(DType::f64);
      for (Var p : lm.parameters())  // away from the init: zero biases hide mistakes
        p.data() = add(p.data(), mul(randn(p.shape(), g, DType::f64), 0.3));
      const Tensor ids = from_vector<int64_t>({0, 3, 6, 3, 1, 2, 2, 5, 4, 0}, {2, 5});
      check_gradients([&](Ins) { return lm.forward(ids); }, with_params({}, lm));
    }
}

TEST_CASE("DecoderLM: GPT-2 initialisation, tied head, causal") {
  Generator g(5);
  ModelConfig c = tiny_lm();
  c.d_model = 64, c.d_ff = 256, c.decoder_layers = 4, c.tgt_vocab = c.src_vocab = 50;
  c.max_len = 64;
  DecoderLM lm(c, g, std::make_shared<Generator>(1));
  // N(0, 0.02) weights, N(0, 0.02 / sqrt(2 * 4)) residual projections
  CHECK(std::abs(std_of(lm.embed->weight.data()) - 0.02) < 0.002);
  CHECK(std::abs(std_of(lm.pos->table.data()) - 0.02) < 0.002);
  const auto& blk = *lm.blocks->layers[2];
  CHECK(std::abs(std_of(blk.self_attn->w_q->weight.data()) - 0.02) < 0.002);
  CHECK(std::abs(std_of(blk.ffn->linear1->weight.data()) - 0.02) < 0.002);
  const double resid = 0.02 / std::sqrt(8.0);
  CHECK(std::abs(std_of(blk.self_attn->w_o->weight.data()) - resid) < 0.1 * resid);
  CHECK(std::abs(std_of(blk.ffn->linear2->weight.data()) - resid) < 0.1 * resid);
  CHECK(max(abs(blk.ffn->linear1->bias.data())).item() == 0);
  // no separate output matrix: the embedding is the head
  for (const auto& [name, p] : lm.named_parameters())
    CHECK(name.find("output") == std::string::npos);

  // Changing token 4 changes no logit before position 4.
  Tensor a = randint({2, 9}, 0, 50, g), b = a.clone();
  b.data<int64_t>()[4] = (a.data<int64_t>()[4] + 1) % 50;
  const Tensor la = lm.forward(a).data(), lb = lm.forward(b).data();
  CHECK(max_abs_diff(la.narrow(1, 0, 4), lb.narrow(1, 0, 4)) == 0);
  CHECK(max_abs_diff(la.narrow(1, 4, 1), lb.narrow(1, 4, 1)) > 0);
}

TEST_CASE("DecoderLM key/value cache equals the full forward, every position kind and variant") {
  struct Case {
    std::string position, attention;
    int64_t window;
  };
  const std::vector<Case> cases = {{"learned", "dot", 0},   {"sinusoidal", "dot", 0},
                                   {"relative", "dot", 0},  {"rope", "dot", 0},
                                   {"none", "dot", 0},      {"learned", "dot", 3},
                                   {"rope", "additive", 0}, {"learned", "linear", 0}};
  for (const Case& k : cases) {
    INFO(k.position << " " << k.attention << " window " << k.window);
    Generator g(7);
    DecoderLM lm(tiny_lm(qkv::parse_name<PositionKind>(k.position, "position"),
                         qkv::parse_name<AttentionKind>(k.attention, "attention"), k.window),
                 g, std::make_shared<Generator>(1));
    lm.to(DType::f64);
    for (Var p : lm.parameters())  // relative bias starts at zero: move it
      p.data() = add(p.data(), mul(randn(p.shape(), g, DType::f64), 0.1));
    lm.eval();
    const Tensor ids = randint({2, 11}, 0, 7, g);
    const Tensor full = lm.forward(ids).data();  // (2, 11, V)
    // a prompt of 4 in one pass, then one token at a time
    DecoderLM::Cache cache;
    std::vector<Tensor> parts = {lm.step(cache, ids.narrow(1, 0, 4)).data()};
    for (int64_t t = 4; t < 11; ++t) parts.push_back(lm.step(cache, ids.narrow(1, t, 1)).data());
    CHECK(cache.length == 11);
    CHECK(cache.layers.size() == 2);
    CHECK(cache.layers[1].k.shape() == Shape{2, 2, 11, 4});
    const Tensor stepped = concat(parts, 1);
    CHECK(max_abs_diff(stepped, full) < 1e-12);
  }
  // learned positions end at max_len: the cache says so instead of reading past the table
  Generator g(8);
  DecoderLM lm(tiny_lm(), g, std::make_shared<Generator>(1));
  lm.eval();
  DecoderLM::Cache cache;
  lm.step(cache, zeros({1, 32}, DType::i64));
  CHECK_THROWS_WITH(lm.step(cache, zeros({1, 1}, DType::i64)),
                    Catch::Contains("beyond the learned positions' max_len 32"));
}

TEST_CASE("DecoderLM attn_only: attention alone, one residual branch per block, cached decoding") {
  Generator g(9);
  ModelConfig c = tiny_lm();
  c.attn_only = true;
  c.d_ff = 0;  // unused, so unchecked
  c.d_model = 64, c.decoder_layers = 4, c.tgt_vocab = c.src_vocab = 50, c.max_len = 64;
  DecoderLM lm(c, g, std::make_shared<Generator>(1));
  for (const auto& [name, p] : lm.named_parameters()) {
    INFO(name);
    CHECK(name.find("ffn") == std::string::npos);
    CHECK(name.find("norm2") == std::string::npos);
  }
  CHECK(lm.blocks->layers[0]->ffn == nullptr);
  const double resid = 0.02 / std::sqrt(4.0);  // 4 blocks, one branch each
  CHECK(std::abs(std_of(lm.blocks->layers[1]->self_attn->w_o->weight.data()) - resid) <
        0.1 * resid);

  ModelConfig small = tiny_lm();
  small.attn_only = true;
  for (bool norm_first : {true, false}) {
    INFO("norm_first " << norm_first);
    small.norm_first = norm_first, small.final_norm = true, small.max_len = 11;
    DecoderLM m(small, g, std::make_shared<Generator>(1));
    m.to(DType::f64);
    for (Var p : m.parameters())
      p.data() = add(p.data(), mul(randn(p.shape(), g, DType::f64), 0.3));
    const Tensor ids = randint({2, 11}, 0, 7, g);
    check_gradients([&](Ins) { return m.forward(ids.narrow(1, 0, 5)); }, with_params({}, m));
    m.eval();
    const Tensor full = m.forward(ids).data();
    DecoderLM::Cache cache;
    std::vector<Tensor> parts = {m.step(cache, ids.narrow(1, 0, 4)).data()};
    for (int64_t t = 4; t < 11; ++t) parts.push_back(m.step(cache, ids.narrow(1, t, 1)).data());
    CHECK(max_abs_diff(concat(parts, 1), full) < 1e-12);
  }
}
