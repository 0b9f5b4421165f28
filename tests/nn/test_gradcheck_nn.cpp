// gradcheck in float64 of every layer and block: the modules are converted with to(f64) and
// their parameters passed as inputs, so every parameter's gradient is checked along with the
// inputs'. Sizes are tiny so the whole file runs in about a second.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using Ins = const std::vector<Var>&;

namespace {

BlockConfig tiny_block(bool norm_first) {
  BlockConfig c;
  c.d_model = 6;
  c.heads = 2;
  c.d_ff = 10;
  c.dropout = 0;
  c.norm_first = norm_first;
  return c;
}

}  // namespace

TEST_CASE("gradcheck: Linear, Embedding, LayerNorm, FFN") {
  Generator g(1);
  Linear lin(4, 3, g);
  lin.to(DType::f64);
  // nonzero bias so the check does not pass by symmetry
  lin.bias.data().copy_(uniform({3}, -1, 1, g, DType::f64));
  check_gradients([&](Ins in) { return lin.forward(in[0]); },
                  with_params({leaf({2, 5, 4}, g)}, lin));
  Linear nob(4, 3, g, false);
  nob.to(DType::f64);
  check_gradients([&](Ins in) { return nob.forward(in[0]); }, with_params({leaf({3, 4}, g)}, nob));

  for (bool scaled : {false, true}) {
    Embedding emb(5, 3, g, scaled);
    emb.to(DType::f64);
    const Tensor ids = from_vector<int64_t>({0, 4, 4, 2, 0, 1}, {2, 3});  // repeats accumulate
    check_gradients([&](Ins) { return emb.forward(ids); }, with_params({}, emb));
  }

  LayerNorm ln(5, 1e-3);
  ln.to(DType::f64);
  ln.weight.data().copy_(uniform({5}, 0.5, 1.5, g, DType::f64));
  ln.bias.data().copy_(uniform({5}, -1, 1, g, DType::f64));
  check_gradients([&](Ins in) { return ln.forward(in[0]); }, with_params({leaf({2, 3, 5}, g)}, ln));

  for (Activation a : {Activation::relu, Activation::gelu}) {
    PositionwiseFeedForward ffn(4, 7, g, a, 0.0, nullptr);
    ffn.to(DType::f64);
    check_gradients([&](Ins in) { return ffn.forward(in[0]); },
                    with_params({leaf({2, 3, 4}, g)}, ffn));
  }
}

TEST_CASE("gradcheck: scaled dot-product attention, with and without masks, scale 1") {
  Generator g(2);
  const Tensor causal = causal_mask(3, 4);
  const Tensor pad = key_padding_mask(valid_mask({4, 2}, 4));  // (2, 1, 1, 4)
  const Tensor both = combine_masks(causal, pad);
  Tensor with_empty_row = ones({3, 4}, DType::b8);
  with_empty_row.select(0, 2).fill_(0);  // a fully masked row: zero, finite gradients
  for (const Tensor& mask : {Tensor(), causal, pad, both, with_empty_row})
    for (AttentionScale s : {AttentionScale(), AttentionScale(1.0), AttentionScale(0.3)}) {
      INFO("mask " << (mask.defined() ? shape_str(mask.shape()) : "none") << " scale "
                   << (s.is_default() ? "default" : std::to_string(s.config_value())));
      // q: (B, H, n, d_k), k: (B, H, m, d_k), v: (B, H, m, d_v) with d_v != d_k
      check_gradients(
          [&](Ins in) { return scaled_dot_product_attention(in[0], in[1], in[2], mask, s); },
          {leaf({2, 2, 3, 5}, g), leaf({2, 2, 4, 5}, g), leaf({2, 2, 4, 3}, g)});
    }
  // the weights output is differentiable too
  check_gradients(
      [&](Ins in) {
        Var w;
        scaled_dot_product_attention(in[0], in[1], in[2], causal, std::nullopt, &w);
        return w;
      },
      {leaf({3, 5}, g), leaf({4, 5}, g), leaf({4, 2}, g)});
}

TEST_CASE("gradcheck: multi-head attention, self and cross, with padding masks") {
  Generator g(3);
  MultiHeadAttention mha(6, 2, g);
  mha.to(DType::f64);
  for (const Var& b : {mha.w_q->bias, mha.w_k->bias, mha.w_v->bias, mha.w_o->bias}) {
    Var bb = b;
    bb.data().copy_(uniform({6}, -0.5, 0.5, g, DType::f64));
  }
  const Tensor self_mask = combine_masks(causal_mask(4), key_padding_mask(valid_mask({4, 3}, 4)));
  check_gradients([&](Ins in) { return mha.forward(in[0], in[0], in[0], self_mask); },
                  with_params({leaf({2, 4, 6}, g)}, mha));
  const Tensor cross_mask = key_padding_mask(valid_mask({5, 2}, 5));
  check_gradients([&](Ins in) { return mha.forward(in[0], in[1], in[1], cross_mask); },
                  with_params({leaf({2, 3, 6}, g), leaf({2, 5, 6}, g)}, mha));
  // distinct key and value tensors, no mask, scale 1, no biases
  MultiHeadAttention nob(6, 3, g, false, 1.0);
  nob.to(DType::f64);
  check_gradients([&](Ins in) { return nob.forward(in[0], in[1], in[2]); },
                  with_params({leaf({1, 2, 6}, g), leaf({1, 3, 6}, g), leaf({1, 3, 6}, g)}, nob));
}

TEST_CASE("gradcheck: learned positional encoding") {
  Generator g(4);
  PositionalEncoding pe(PositionKind::learned, 4, 6, g, 0.0, nullptr);
  pe.to(DType::f64);
  check_gradients([&](Ins in) { return pe.forward(in[0], 2); },
                  with_params({leaf({2, 3, 4}, g)}, pe));
  PositionalEncoding sin(PositionKind::sinusoidal, 4, 0, g, 0.0, nullptr);
  check_gradients([&](Ins in) { return sin.forward(in[0], 5); }, {leaf({2, 3, 4}, g)});
}

TEST_CASE("gradcheck: encoder and decoder blocks, post-LN and pre-LN") {
  Generator g(5);
  for (bool nf : {false, true}) {
    INFO((nf ? "pre-LN" : "post-LN"));
    TransformerEncoderBlock enc(tiny_block(nf), g, nullptr);
    enc.to(DType::f64);
    const Tensor pad = key_padding_mask(valid_mask({3, 2}, 3));
    check_gradients([&](Ins in) { return enc.forward(in[0], pad); },
                    with_params({leaf({2, 3, 6}, g)}, enc));

    TransformerDecoderBlock dec(tiny_block(nf), g, nullptr);
    dec.to(DType::f64);
    const Tensor self_mask = combine_masks(causal_mask(3), key_padding_mask(valid_mask({3, 2}, 3)));
    const Tensor cross_mask = key_padding_mask(valid_mask({4, 2}, 4));
    check_gradients([&](Ins in) { return dec.forward(in[0], in[1], self_mask, cross_mask); },
                    with_params({leaf({2, 3, 6}, g), leaf({2, 4, 6}, g)}, dec));
  }
}

TEST_CASE("gradcheck: a small Seq2Seq, post-LN and pre-LN, through cross-entropy") {
  const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 0, 0}, {2, 4});
  const Tensor tgt_in = from_vector<int64_t>({0, 1, 2, 0, 3, 4}, {2, 3});
  const Tensor tgt_out = from_vector<int64_t>({1, 2, 5, 3, 4, -100}, {6});
  const Tensor sv = valid_mask({4, 2}, 4), tv = valid_mask({3, 2}, 3);
  for (bool nf : {false, true}) {
    INFO((nf ? "pre-LN" : "post-LN"));
    Generator g(6);
    ModelConfig c = tiny_config(nf);
    c.d_model = 4;
    c.d_ff = 6;
    c.decoder_layers = 1;
    Seq2Seq m(c, g);
    m.to(DType::f64);
    check_gradients([&](Ins) { return m.forward(src, tgt_in, sv, tv); }, with_params({}, m));
    check_gradients(
        [&](Ins) {
          const Var logits = m.forward(src, tgt_in, sv, tv);
          return ag::cross_entropy(ag::reshape(logits, {6, c.tgt_vocab}), tgt_out, -100, 0.1);
        },
        with_params({}, m));
  }
}

TEST_CASE("gradcheck: cross-entropy with label smoothing and ignore_index") {
  Generator g(7);
  const Tensor t = from_vector<int64_t>({2, 0, 3, 3, 1, 2}, {6});  // 3 is ignored
  for (double ls : {0.0, 0.1, 0.5}) {
    INFO("label smoothing " << ls);
    check_gradients([&](Ins in) { return ag::cross_entropy(in[0], t, 3, ls); },
                    {leaf({6, 4}, g, DType::f64, -3, 3)});
  }
  Linear head(5, 4, g);
  head.to(DType::f64);
  check_gradients([&](Ins in) { return ag::cross_entropy(head.forward(in[0]), t, 3, 0.2); },
                  with_params({leaf({6, 5}, g)}, head));
}

TEST_CASE("gradcheck: share_embeddings and tie_output, a shared tensor gets the sum of its uses") {
  const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 0, 0, 0}, {2, 4});
  const Tensor tgt_in = from_vector<int64_t>({0, 1, 2, 0, 3, 4}, {2, 3});
  const Tensor sv = valid_mask({4, 2}, 4), tv = valid_mask({3, 2}, 3);
  for (const auto& [share, tie] : {std::pair{true, false}, {false, true}, {true, true}}) {
    INFO("share_embeddings " << share << ", tie_output " << tie);
    Generator g(8);
    ModelConfig c = tiny_config(false);
    c.src_vocab = c.tgt_vocab = 6, c.d_model = 4, c.d_ff = 6, c.decoder_layers = 1;
    c.share_embeddings = share, c.tie_output = tie;
    Seq2Seq m(c, g);
    m.to(DType::f64);
    check_gradients([&](Ins) { return m.forward(src, tgt_in, sv, tv); }, with_params({}, m));

    // The same function with one copy of the shared table per use: the shared table's gradient
    // must be the sum of the copies' gradients, every other gradient the same.
    ModelConfig u = c;
    u.share_embeddings = false, u.tie_output = false;
    Seq2Seq twin(u, g);
    twin.to(DType::f64);
    const std::string table = share ? "src_embed.weight" : "tgt_embed.weight";
    std::map<std::string, Tensor> ours;
    for (const auto& [n, t] : m.state_dict()) ours[n] = t;
    std::map<std::string, std::string> source;  // twin name -> the name in m it copies
    for (const auto& [n, v] : twin.named_parameters()) {
      source[n] = n;
      if (share && n == "tgt_embed.weight") source[n] = "src_embed.weight";
      if (tie && n == "output.weight") source[n] = table;
      Var p = v;
      if (tie && n == "output.bias")
        p.data().fill_(0);  // the tied projection has no bias
      else
        p.data().copy_(ours.at(source[n]));
    }
    const Var out = m.forward(src, tgt_in, sv, tv), out_twin = twin.forward(src, tgt_in, sv, tv);
    REQUIRE(max_abs_diff(out.data(), out_twin.data()) < 1e-12);
    const Tensor R = randn(out.shape(), g, DType::f64);
    const auto named = m.named_parameters(), twin_named = twin.named_parameters();
    std::vector<Var> ps, twin_ps;
    for (const auto& [n, v] : named) ps.push_back(v);
    for (const auto& [n, v] : twin_named) twin_ps.push_back(v);
    const std::vector<Tensor> grads = ag::grad({out}, {R}, ps);
    const std::vector<Tensor> twin_grads = ag::grad({out_twin}, {R}, twin_ps);
    std::map<std::string, Tensor> summed;  // name in m -> sum of its copies' gradients
    int uses = 0;
    for (size_t i = 0; i < twin_named.size(); ++i) {
      if (tie && twin_named[i].first == "output.bias") continue;
      const std::string& to = source[twin_named[i].first];
      uses += to == table;
      summed[to] = summed.count(to) ? add(summed[to], twin_grads[i]) : twin_grads[i];
    }
    CHECK(uses == 1 + int(share) + int(tie));  // the table really is used that many times
    for (size_t i = 0; i < named.size(); ++i) {
      INFO(named[i].first);
      CHECK(rel_err(grads[i], summed.at(named[i].first)) < 1e-12);
    }
  }
}
