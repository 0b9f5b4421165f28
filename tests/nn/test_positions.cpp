// Relative position bias and rotary positions (RoPE): their defining properties, gradients in
// float64, and incremental decoding that agrees with the full decoder.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>

#include "nn/relative_bias.hpp"
#include "nn/rotary.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using Ins = const std::vector<Var>&;

namespace {

// Every relative_bias table of m gets random values (they start at zero, where a relative
// model cannot be told from a position-free one).
void randomize_relative(Module& m, Generator& g) {
  for (auto& [name, p] : m.named_parameters())
    if (name.size() >= 13 && name.substr(name.size() - 13) == "relative_bias") {
      Var v = p;
      v.data().copy_(uniform(v.shape(), -1, 1, g, v.dtype()));
    }
}

// a . b of two (d) rows
double dot(const Tensor& a, const Tensor& b) { return sum(mul(a, b)).item(); }

}  // namespace

TEST_CASE("rope: each pair (2i, 2i+1) turns by position * 10000^(-2i/d)") {
  Generator g(1);
  const int64_t d = 6, pos = 5;
  const Tensor x = uniform({1, d}, -1, 1, g, DType::f64);
  const Tensor y = rotary(Var(x), pos).data();
  for (int64_t i = 0; i < d / 2; ++i) {
    const double a = pos * std::pow(10000.0, -2.0 * i / d);
    const double x0 = x.at({0, 2 * i}), x1 = x.at({0, 2 * i + 1});
    CHECK(y.at({0, 2 * i}) == Approx(x0 * std::cos(a) - x1 * std::sin(a)).epsilon(1e-14));
    CHECK(y.at({0, 2 * i + 1}) == Approx(x0 * std::sin(a) + x1 * std::cos(a)).epsilon(1e-14));
  }
  // position 0 is the identity; rows of a (n, d) input sit at offset, offset + 1, ...
  CHECK(max_abs_diff(rotary(Var(x), 0).data(), x) == 0);
  const Tensor rows = uniform({3, d}, -1, 1, g, DType::f64);
  const Tensor all = rotary(Var(rows), 4).data();
  for (int64_t r = 0; r < 3; ++r)
    CHECK(max_abs_diff(all.select(0, r),
                       rotary(Var(rows.narrow(0, r, 1)), 4 + r).data().select(0, 0)) < 1e-15);
  CHECK_THROWS_WITH(rotary(Var(zeros({2, 5}))),
                    Catch::Contains("(2, 5)") && Catch::Contains("even"));
}

TEST_CASE("rope: q_i . k_j after rotation depends only on i - j (float64, several shifts)") {
  Generator g(2);
  const int64_t d = 16;
  const Tensor q = uniform({1, d}, -1, 1, g, DType::f64), k = uniform({1, d}, -1, 1, g, DType::f64);
  auto score = [&](int64_t i, int64_t j) {
    return dot(rotary(Var(q), i).data(), rotary(Var(k), j).data());
  };
  std::map<int64_t, double> first;  // offset j - i -> the score at shift 0
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t shift : {0, 1, 7, 40, 333, 5000}) {
        const double s = score(i + shift, j + shift);
        if (!first.count(j - i)) first[j - i] = s;
        INFO("i " << i << " j " << j << " shift " << shift);
        CHECK(std::abs(s - first[j - i]) < 1e-11);
      }
  // ... and it does depend on the offset (so the check above can fail)
  CHECK(std::abs(first[1] - first[0]) > 1e-3);
  CHECK(std::abs(first[-3] - first[3]) > 1e-3);
  // rotation keeps lengths
  CHECK(dot(rotary(Var(q), 123).data(), rotary(Var(q), 123).data()) ==
        Approx(dot(q, q)).epsilon(1e-13));
}

TEST_CASE("relative: offsets are clip(j - i, -K, K), shifted by the query offset") {
  const Tensor idx = relative_offsets(3, 5, 0, 2);    // (3 * 5)
  const std::vector<int64_t> want = {2, 3, 4, 4, 4,   // i = 0: j - i = 0 1 2 3 4
                                     1, 2, 3, 4, 4,   // i = 1
                                     0, 1, 2, 3, 4};  // i = 2
  CHECK(to_vector<int64_t>(idx) == want);
  // one query at position 4 over keys 0..4 (a decoding step): offsets -4..0, clipped to -2
  CHECK(to_vector<int64_t>(relative_offsets(1, 5, 4, 2)) == std::vector<int64_t>{0, 0, 0, 1, 2});
  Generator g(3);
  const Var table(uniform({2, 5}, -1, 1, g, DType::f64));
  const Tensor b = relative_position_bias(table, 3, 5).data();
  CHECK(b.shape() == Shape{1, 2, 3, 5});
  CHECK(b.at({0, 1, 2, 0}) == table.data().at({1, 0}));  // j - i = -2
  CHECK(b.at({0, 0, 0, 4}) == table.data().at({0, 4}));  // j - i = 4, clipped to 2
  CHECK_THROWS_WITH(relative_position_bias(Var(zeros({2, 4})), 3, 3), Catch::Contains("(2, 4)"));
}

// With the same content at every position, log w_ij - log w_ii = s_ij - s_ii: for relative and
// rope attention it must depend on i and j only through j - i.
TEST_CASE("relative and rope attention: weights depend on positions only through i - j") {
  for (PositionKind kind : {PositionKind::relative, PositionKind::rope, PositionKind::none}) {
    INFO("kind " << static_cast<int>(kind));
    Generator g(4);
    MultiHeadAttention mha(8, 2, g);
    mha.use_positions(kind, 3);
    mha.to(DType::f64);
    randomize_relative(mha, g);
    const int64_t n = 9;
    const Tensor row = uniform({1, 1, 8}, -1, 1, g, DType::f64);
    const Var x(row.expand({1, n, 8}).contiguous());
    const Var w = forward_with_weights(mha, x, x, x).weights;  // (1, 2, n, n)
    const Tensor lw = log(w.data());
    double spread = 0;
    for (int64_t h = 0; h < 2; ++h) {
      std::map<int64_t, double> seen;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const double rel = lw.at({0, h, i, j}) - lw.at({0, h, i, i});
          if (!seen.count(j - i)) seen[j - i] = rel;
          CHECK(std::abs(rel - seen[j - i]) < 1e-12);
          spread = std::max(spread, std::abs(rel));
        }
      if (kind == PositionKind::relative)  // offsets beyond K = 3 share the edge value
        for (int64_t o = 4; o < n; ++o) {
          CHECK(std::abs(seen[o] - seen[3]) < 1e-12);
          CHECK(std::abs(seen[-o] - seen[-3]) < 1e-12);
        }
    }
    // positions matter for relative and rope; without them the weights are uniform
    if (kind == PositionKind::none)
      CHECK(spread < 1e-12);
    else
      CHECK(spread > 1e-3);
  }
}

TEST_CASE("scaled_dot_product_attention: an additive bias, its gradient, and the fused path") {
  Generator g(5);
  const Tensor mask = combine_masks(causal_mask(3, 4), key_padding_mask(valid_mask({4, 3}, 4)));
  // bias broadcast over the batch (1, H, n, m) and over everything but keys (m)
  for (const Shape& bs : {Shape{1, 2, 3, 4}, Shape{4}}) {
    INFO("bias " << shape_str(bs));
    check_gradients(
        [&](Ins in) {
          return scaled_dot_product_attention(in[0], in[1], in[2], mask, std::nullopt, nullptr, 0.0,
                                              nullptr, in[3]);
        },
        {leaf({2, 2, 3, 5}, g), leaf({2, 2, 4, 5}, g), leaf({2, 2, 4, 3}, g), leaf(bs, g)});
  }
  // a bias adds to the scores exactly: bias c on every score changes nothing, and a zero
  // bias (dense path) gives the fused kernel's result
  const Var q = leaf({2, 2, 3, 5}, g), k = leaf({2, 2, 4, 5}, g), v = leaf({2, 2, 4, 3}, g);
  const Tensor fused = scaled_dot_product_attention(q, k, v, mask).data();
  const Tensor zero = scaled_dot_product_attention(q, k, v, mask, std::nullopt, nullptr, 0.0,
                                                   nullptr, Var(zeros({1}, DType::f64)))
                          .data();
  const Tensor shifted = scaled_dot_product_attention(q, k, v, mask, std::nullopt, nullptr, 0.0,
                                                      nullptr, Var(full({1}, 3.0, DType::f64)))
                             .data();
  CHECK(rel_err(zero, fused) < 1e-13);
  CHECK(rel_err(shifted, fused) < 1e-13);
  // a large negative bias on one key works as a mask
  Tensor mb = zeros({4}, DType::f64);
  mb.narrow(0, 1, 1).fill_(-1e9);
  Tensor m2 = ones({4}, DType::b8);
  m2.narrow(0, 1, 1).fill_(0);
  const Tensor by_bias =
      scaled_dot_product_attention(q, k, v, Tensor(), std::nullopt, nullptr, 0.0, nullptr, Var(mb))
          .data();
  CHECK(rel_err(by_bias, scaled_dot_product_attention(q, k, v, m2).data()) < 1e-12);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, Tensor(), std::nullopt, nullptr, 0.0,
                                                 nullptr, Var(zeros({5}, DType::f64))),
                    Catch::Contains("bias") && Catch::Contains("(5)"));
}

TEST_CASE("gradcheck: rotary, relative bias, and attention / blocks with each position kind") {
  Generator g(6);
  check_gradients([](Ins in) { return rotary(in[0], 3); }, {leaf({2, 3, 4, 6}, g)});
  check_gradients([](Ins in) { return relative_position_bias(in[0], 3, 5, 1); }, {leaf({2, 5}, g)});
  for (PositionKind kind : {PositionKind::relative, PositionKind::rope}) {
    INFO("kind " << static_cast<int>(kind));
    MultiHeadAttention mha(8, 2, g);
    mha.use_positions(kind, 2);
    mha.to(DType::f64);
    randomize_relative(mha, g);
    const Tensor self_mask = combine_masks(causal_mask(4), key_padding_mask(valid_mask({4, 3}, 4)));
    check_gradients([&](Ins in) { return mha.forward(in[0], in[0], in[0], self_mask); },
                    with_params({leaf({2, 4, 8}, g)}, mha));
    // a decoding step: one query at position 3 over 4 cached keys
    check_gradients(
        [&](Ins in) {
          return mha.attend(in[0], mha.project_key(in[1]), mha.project_value(in[1]), Tensor(), 3);
        },
        with_params({leaf({2, 1, 8}, g), leaf({2, 4, 8}, g)}, mha));

    BlockConfig c;
    c.d_model = 4;
    c.heads = 2;
    c.d_ff = 6;
    c.dropout = 0;
    c.position = kind;
    c.relative_clip = 2;
    TransformerEncoderBlock enc(c, g, nullptr);
    enc.to(DType::f64);
    randomize_relative(enc, g);
    const Tensor pad = key_padding_mask(valid_mask({3, 2}, 3));
    check_gradients([&](Ins in) { return enc.forward(in[0], pad); },
                    with_params({leaf({2, 3, 4}, g)}, enc));
    TransformerDecoderBlock dec(c, g, nullptr);
    dec.to(DType::f64);
    randomize_relative(dec, g);
    const Tensor sm = combine_masks(causal_mask(3), key_padding_mask(valid_mask({3, 2}, 3)));
    check_gradients([&](Ins in) { return dec.forward(in[0], in[1], sm, pad); },
                    with_params({leaf({2, 3, 4}, g), leaf({2, 3, 4}, g)}, dec));
  }
}

TEST_CASE("relative and rope: self-attention only, nothing added to the embeddings") {
  Generator g(7);
  ModelConfig c = tiny_config(false);
  c.position = qkv::nn::PositionKind::relative;
  c.relative_clip = 3;
  Seq2Seq m(c, g);
  std::map<std::string, Shape> shapes;
  for (const auto& [name, p] : m.named_parameters()) shapes[name] = p.shape();
  CHECK(shapes.at("encoder.layers.0.self_attn.relative_bias") == Shape{2, 7});
  CHECK(shapes.at("decoder.layers.1.self_attn.relative_bias") == Shape{2, 7});
  CHECK(!shapes.count("decoder.layers.0.cross_attn.relative_bias"));
  CHECK(!shapes.count("src_pos.weight"));
  CHECK(m.decoder->layers[0]->cross_attn->position == PositionKind::none);
  // the position modules add nothing
  const Var x(uniform({1, 4, 8}, -1, 1, g));
  CHECK(max_abs_diff(m.src_pos->forward(x).data(), x.data()) == 0);

  c.position = qkv::nn::PositionKind::rope;
  Seq2Seq r(c, g);
  CHECK(r.parameter_count() == m.parameter_count() - 3 * 2 * 7);  // no tables
  CHECK(r.encoder->layers[0]->self_attn->position == PositionKind::rope);
  CHECK(r.decoder->layers[0]->cross_attn->position == PositionKind::none);

  c.d_model = 6;  // heads 2: head width 3 cannot be rotated in pairs
  CHECK_THROWS_WITH(Seq2Seq(c, g), Catch::Contains("model.position") && Catch::Contains("even"));
  c.d_model = 8;
  c.position = qkv::nn::PositionKind::relative;
  c.relative_clip = 0;
  CHECK_THROWS_WITH(Seq2Seq(c, g), Catch::Contains("model.relative_clip"));
}

TEST_CASE("relative and rope: decode_step with the KV cache gives the full decoder's logits") {
  for (const char* pos : {"relative", "rope"})
    for (bool nf : {false, true}) {
      INFO(pos << (nf ? " pre-LN" : " post-LN"));
      Generator g(9);
      ModelConfig c = tiny_config(nf);
      c.position = qkv::parse_name<PositionKind>(pos, "position");
      c.relative_clip = 3;  // T = 7 > K: clipped offsets are exercised
      Seq2Seq m(c, g);
      m.to(DType::f64);
      randomize_relative(m, g);
      m.eval();
      const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 5, 4, 0, 0}, {2, 5});
      const Tensor sv = valid_mask({5, 3}, 5);
      const int64_t T = 7;
      const Tensor tgt = randint({2, T}, 0, c.tgt_vocab, g);
      const Var memory = m.encode(src, sv);
      const Tensor full = m.decode(memory, sv, tgt, valid_mask({T, T}, T)).data();  // (2, T, V)
      auto st = m.start_decoding(memory, sv);
      double worst = 0;
      for (int64_t t = 0; t < T; ++t) {
        const Tensor step = m.decode_step(st, tgt.select(1, t).contiguous()).data();  // (2, V)
        worst = std::max(worst, rel_err(step, full.select(1, t)));
      }
      INFO("worst relative difference " << worst);
      CHECK(worst < 1e-12);
      CHECK(st.as<Seq2Seq::Cache>().cache[1].self_k.shape() == Shape{2, 2, T, 4});
    }
}
