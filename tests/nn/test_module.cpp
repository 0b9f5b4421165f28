// Module basics: dotted names, parameter counts, train/eval, state_dict through safetensors and
// the strict loader's errors.
#include <catch2/catch.hpp>

#include <set>

#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The lesson's count, written out from the shapes, for a model without sharing or tying.
int64_t expected_count(const ModelConfig& c) {
  const int64_t d = c.d_model, f = c.d_ff;
  const int64_t mha = 4 * d * d + 4 * d, ffn = 2 * d * f + f + d;
  const int64_t enc = mha + ffn + 4 * d, dec = 2 * mha + ffn + 6 * d;
  const bool fn = c.final_norm || c.norm_first;
  return c.src_vocab * d + c.tgt_vocab * d + c.encoder_layers * enc + c.decoder_layers * dec +
         (fn ? 4 * d : 0) + d * c.tgt_vocab + c.tgt_vocab;
}

ModelConfig small_config() {
  ModelConfig c;
  c.src_vocab = 11;
  c.tgt_vocab = 13;
  c.d_model = 16;
  c.heads = 4;
  c.d_ff = 24;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.dropout = 0.2;
  return c;
}

// A fixed small batch: src (2, 5), tgt_in (2, 4), with padding in the second row.
struct Batch {
  Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 0, 0}, {2, 5});
  Tensor tgt = from_vector<int64_t>({1, 9, 10, 11, 1, 12, 3, 0}, {2, 4});
  Tensor src_valid = valid_mask({5, 3}, 5);
  Tensor tgt_valid = valid_mask({4, 3}, 4);
};

}  // namespace

TEST_CASE("module: hierarchical dotted names, unique, in registration order") {
  Generator g(1);
  const Seq2Seq m(small_config(), g);
  const auto names = names_of(m);
  for (const char* want :
       {"src_embed.weight", "tgt_embed.weight", "encoder.layers.0.self_attn.w_q.weight",
        "encoder.layers.0.self_attn.w_o.bias", "encoder.layers.1.ffn.linear1.weight",
        "encoder.layers.1.ffn.linear2.bias", "encoder.layers.0.norm1.weight",
        "encoder.layers.0.norm2.bias", "decoder.layers.0.self_attn.w_k.weight",
        "decoder.layers.1.cross_attn.w_v.bias", "decoder.layers.1.norm3.weight", "output.weight",
        "output.bias"}) {
    INFO(want);
    CHECK(has(names, want));
  }
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  // Sinusoidal positions, dropout and post-LN without final_norm add no parameters.
  CHECK_FALSE(has(names, "encoder.norm.weight"));
  for (const auto& n : names) CHECK(n.find("pos") == std::string::npos);
  // Registration order: embeddings, then the encoder's first layer, w_q before w_k.
  CHECK(names.front() == "src_embed.weight");
  const auto at = [&](const std::string& s) { return std::find(names.begin(), names.end(), s); };
  CHECK(at("encoder.layers.0.self_attn.w_q.weight") < at("encoder.layers.0.self_attn.w_k.weight"));
  CHECK(at("encoder.layers.1.norm2.bias") < at("decoder.layers.0.self_attn.w_q.weight"));
  // The registry holds the very Var the layer computes with.
  const auto np = m.named_parameters();
  const auto it = std::find_if(np.begin(), np.end(), [](const auto& p) {
    return p.first == "decoder.layers.1.cross_attn.w_v.bias";
  });
  REQUIRE(it != np.end());
  CHECK(it->second.impl() == m.decoder->layers[1]->cross_attn->w_v->bias.impl());
}

TEST_CASE("module: parameter counts follow the shapes") {
  Generator g(2);
  CHECK(Linear(5, 3, g).parameter_count() == 5 * 3 + 3);
  CHECK(Linear(5, 3, g, false).parameter_count() == 15);
  CHECK(Linear(5, 3, g, false).bias.defined() == false);
  CHECK(Embedding(10, 4, g).parameter_count() == 40);
  CHECK(LayerNorm(7).parameter_count() == 14);
  CHECK(PositionwiseFeedForward(6, 20, g, Activation::relu, 0, nullptr).parameter_count() ==
        2 * 6 * 20 + 20 + 6);
  CHECK(MultiHeadAttention(8, 2, g).parameter_count() == 4 * 64 + 4 * 8);
  CHECK(MultiHeadAttention(8, 2, g, false).parameter_count() == 4 * 64);

  ModelConfig c = small_config();
  CHECK(Seq2Seq(c, g).parameter_count() == expected_count(c));
  c.final_norm = true;
  CHECK(Seq2Seq(c, g).parameter_count() == expected_count(c));
  c.final_norm = false, c.norm_first = true;  // pre-LN stacks always end with a LayerNorm
  const Seq2Seq pre(c, g);
  CHECK(pre.parameter_count() == expected_count(c));
  CHECK(has(names_of(pre), "encoder.norm.weight"));
  CHECK(has(names_of(pre), "decoder.norm.bias"));

  c = small_config();
  c.position = qkv::nn::PositionKind::learned;
  c.max_len = 9;
  CHECK(Seq2Seq(c, g).parameter_count() == expected_count(c) + 2 * 9 * c.d_model);
  c = small_config();
  c.tie_output = true;
  const Seq2Seq tied(c, g);
  CHECK(tied.parameter_count() == expected_count(c) - c.d_model * c.tgt_vocab - c.tgt_vocab);
  CHECK_FALSE(has(names_of(tied), "output.weight"));
  c = small_config();
  c.tgt_vocab = c.src_vocab;
  c.share_embeddings = true;
  const Seq2Seq shared(c, g);
  CHECK(shared.parameter_count() == expected_count(c) - c.tgt_vocab * c.d_model);
  CHECK_FALSE(has(names_of(shared), "tgt_embed.weight"));
  CHECK(shared.src_embed.get() == shared.tgt_embed.get());
}

TEST_CASE("module: layer initialisation as documented") {
  Generator g(3);
  const Linear lin(300, 100, g);
  const double a = std::sqrt(6.0 / 400);
  CHECK(max(abs(lin.weight.data())).item() <= a);
  CHECK(max(abs(lin.weight.data())).item() > 0.95 * a);  // fills the Glorot range
  // U(-a, a) has variance a^2 / 3
  CHECK(var(lin.weight.data()).item() == Approx(a * a / 3).epsilon(0.03));
  CHECK(max(abs(lin.bias.data())).item() == 0);
  const Embedding e(200, 50, g);
  CHECK(mean(e.weight.data()).item() == Approx(0).margin(0.02));
  CHECK(var(e.weight.data()).item() == Approx(1).epsilon(0.03));
  // scaled by sqrt(dim): the table is N(0, 1/dim), so the scaled output has unit variance
  const Embedding e2(200, 64, g, true);
  CHECK(var(e2.weight.data()).item() == Approx(1.0 / 64).epsilon(0.03));
  CHECK(var(e2.forward(arange(200)).data()).item() == Approx(1).epsilon(0.03));
  const LayerNorm ln(6, 1e-3);
  CHECK(ln.eps == 1e-3);
  CHECK(to_vector<float>(ln.weight.data()) == std::vector<float>(6, 1.0f));
  // Embedding scaling by sqrt(dim)
  const Embedding es(5, 16, g, true);
  const Tensor ids = from_vector<int64_t>({3, 0}, {2});
  const Tensor raw = index_select(es.weight.data(), 0, ids);
  CHECK(max_abs_diff(es.forward(ids).data(), mul(raw, 4.0)) == 0);
}

TEST_CASE("module: train() and eval() reach every child, dropout only while training") {
  Generator g(4);
  Seq2Seq m(small_config(), g);
  CHECK(m.is_training());
  CHECK(m.decoder->layers[1]->ffn->dropout->is_training());
  m.eval();
  CHECK_FALSE(m.is_training());
  CHECK_FALSE(m.decoder->layers[1]->ffn->dropout->is_training());
  CHECK_FALSE(m.encoder->layers[0]->self_attn->is_training());
  CHECK_FALSE(m.src_pos->dropout->is_training());

  const Batch b;
  const Tensor e1 = m.forward(b.src, b.tgt, b.src_valid, b.tgt_valid).data();
  const Tensor e2 = m.forward(b.src, b.tgt, b.src_valid, b.tgt_valid).data();
  CHECK(max_abs_diff(e1, e2) == 0);  // eval: deterministic, no dropout
  m.train();
  CHECK(m.decoder->layers[1]->dropout3->is_training());
  const Tensor t1 = m.forward(b.src, b.tgt, b.src_valid, b.tgt_valid).data();
  const Tensor t2 = m.forward(b.src, b.tgt, b.src_valid, b.tgt_valid).data();
  CHECK(max_abs_diff(t1, e1) > 1e-3);  // dropout on
  CHECK(max_abs_diff(t1, t2) > 1e-3);  // fresh masks each call

  // Dropout itself: zeroes about p of the elements and scales the rest by 1/(1-p).
  auto dg = std::make_shared<Generator>(9);
  Dropout d(0.25, dg);
  const Tensor x = ones({100000});
  const Tensor y = d.forward(Var(x)).data();
  const double zero_frac = mean(eq(y, 0.0).to(DType::f32)).item();
  CHECK(zero_frac == Approx(0.25).margin(0.01));
  CHECK(max(y).item() == Approx(1 / 0.75));
  d.eval();
  CHECK(max_abs_diff(d.forward(Var(x)).data(), x) == 0);
  CHECK_THROWS_AS(Dropout(1.0, dg), Error);
}

TEST_CASE("module: state_dict round trip through safetensors restores the outputs exactly") {
  TempDir dir("module");
  ModelConfig c = small_config();
  c.position = qkv::nn::PositionKind::learned;
  Generator g1(10), g2(11);
  Seq2Seq a(c, g1), b(c, g2);
  a.eval(), b.eval();
  const Batch in;
  const Tensor ya = a.forward(in.src, in.tgt, in.src_valid, in.tgt_valid).data();
  CHECK(max_abs_diff(ya, b.forward(in.src, in.tgt, in.src_valid, in.tgt_valid).data()) > 1e-3);

  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, a.state_dict(), {{"format", "qkv"}});
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata.at("format") == "qkv");
  CHECK(f.tensors.size() == a.named_parameters().size());
  b.load_state_dict(f.tensors);
  CHECK(max_abs_diff(ya, b.forward(in.src, in.tgt, in.src_valid, in.tgt_valid).data()) == 0);
  for (const auto& [name, t] : b.state_dict()) {
    INFO(name);
    CHECK(max_abs_diff(t, f.get(name)) == 0);
  }
  // load copies values: changing the file's tensors afterwards does not touch the model
  f.tensors[0].second.fill_(7.0);
  CHECK(max(abs(b.src_embed->weight.data())).item() < 7.0);
}

TEST_CASE("module: strict load names the missing, unexpected or mis-shaped tensor") {
  Generator g(12);
  Seq2Seq m(small_config(), g);
  const NamedTensors good = m.state_dict();
  const std::string victim = "decoder.layers.1.cross_attn.w_k.weight";

  NamedTensors missing;
  for (const auto& nt : good)
    if (nt.first != victim) missing.push_back({nt.first, nt.second.clone()});
  CHECK_THROWS_WITH(m.load_state_dict(missing),
                    Catch::Contains(victim) && Catch::Contains("missing"));

  NamedTensors extra = good;
  extra.push_back({"encoder.layers.7.self_attn.w_q.weight", zeros({16, 16})});
  CHECK_THROWS_WITH(
      m.load_state_dict(extra),
      Catch::Contains("encoder.layers.7.self_attn.w_q.weight") && Catch::Contains("unexpected"));

  NamedTensors shaped = good;
  for (auto& nt : shaped)
    if (nt.first == victim) nt.second = zeros({16, 15});
  CHECK_THROWS_WITH(m.load_state_dict(shaped), Catch::Contains(victim) &&
                                                   Catch::Contains("(16, 15)") &&
                                                   Catch::Contains("(16, 16)"));
  // mis-shaped is an error even when not strict
  CHECK_THROWS_WITH(m.load_state_dict(shaped, false), Catch::Contains(victim));

  NamedTensors typed = good;
  for (auto& nt : typed)
    if (nt.first == victim) nt.second = zeros({16, 16}, DType::f64);
  CHECK_THROWS_WITH(m.load_state_dict(typed),
                    Catch::Contains(victim) && Catch::Contains("float64"));

  // Non-strict: missing and unexpected names are skipped, the rest is loaded.
  Generator g2(13);
  Seq2Seq other(small_config(), g2);
  NamedTensors partial;
  for (const auto& nt : other.state_dict())
    if (nt.first != victim) partial.push_back(nt);
  partial.push_back({"not.a.parameter", zeros({1})});
  const Tensor before = m.decoder->layers[1]->cross_attn->w_k->weight.data().clone();
  m.load_state_dict(partial, false);
  CHECK(max_abs_diff(m.decoder->layers[1]->cross_attn->w_k->weight.data(), before) == 0);
  CHECK(max_abs_diff(m.src_embed->weight.data(), other.src_embed->weight.data()) == 0);
}

TEST_CASE("module: to(float64) converts every parameter and the model runs in float64") {
  Generator g(14);
  Seq2Seq m(small_config(), g);
  m.eval();
  const Batch b;
  const Tensor y32 = m.forward(b.src, b.tgt, b.src_valid, b.tgt_valid).data();
  m.to(DType::f64);
  for (const auto& [n, p] : m.named_parameters()) {
    INFO(n);
    CHECK(p.dtype() == DType::f64);
  }
  CHECK(m.decoder->layers[0]->self_attn->w_q->weight.dtype() == DType::f64);
  const Tensor y64 = m.forward(b.src, b.tgt, b.src_valid, b.tgt_valid).data();
  CHECK(y64.dtype() == DType::f64);
  CHECK(rel_err(y32, y64) < 1e-5);
}

TEST_CASE("module: zero_grad clears every parameter's gradient") {
  Generator g(15);
  Seq2Seq m(tiny_config(false), g);
  const Batch b;
  const Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 6, 0, 0, 0}, {2, 5});
  const Tensor tgt = from_vector<int64_t>({1, 2, 3, 4, 1, 5, 2, 0}, {2, 4});
  const Var y = m.forward(src, tgt, b.src_valid, b.tgt_valid);
  ag::sum(y).backward();
  int64_t with_grad = 0;
  for (const Var& p : m.parameters()) with_grad += p.grad().defined();
  CHECK(with_grad == static_cast<int64_t>(m.parameters().size()));
  m.zero_grad();
  for (const Var& p : m.parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("module: misuse is a qkv::Error naming the shapes or the config key") {
  Generator g(16);
  Seq2Seq m(tiny_config(false), g);
  const Tensor src = from_vector<int64_t>({1, 2, 3}, {1, 3}), sv = valid_mask({3}, 3);
  CHECK_THROWS_WITH(m.forward(from_vector<int64_t>({1, 7, 3}, {1, 3}), src, sv, sv),
                    Catch::Contains("7"));  // token id outside the source vocabulary (7)
  CHECK_THROWS_AS(m.forward(from_vector<int64_t>({1, -1, 3}, {1, 3}), src, sv, sv), Error);
  CHECK_THROWS_WITH(m.forward(src, src, valid_mask({2}, 2), sv), Catch::Contains("(1, 2)"));
  CHECK_THROWS_WITH(m.forward(src, from_vector<int64_t>({1, 2}, {2, 1}), sv, valid_mask({1, 1}, 1)),
                    Catch::Contains("batch"));
  auto st = m.start_decoding(m.encode(src, sv), sv);
  CHECK_THROWS_WITH(m.decode_step(st, from_vector<int64_t>({1, 2}, {2})), Catch::Contains("(2)"));

  ModelConfig c = tiny_config(false);
  c.heads = 3;
  CHECK_THROWS_WITH(Seq2Seq(c, g), Catch::Contains("model.heads"));
  c = tiny_config(false);
  c.share_embeddings = true;  // 7 != 6
  CHECK_THROWS_WITH(Seq2Seq(c, g), Catch::Contains("model.share_embeddings"));
  // "rope" is the name; the config reader parses names (tests/config/test_config.cpp)
  CHECK_THROWS_WITH(qkv::parse_name<PositionKind>("rotary", "model.position"),
                    Catch::Contains("model.position") && Catch::Contains("rope"));
  CHECK_THROWS_WITH(qkv::parse_name<Activation>("swish", "model.activation"),
                    Catch::Contains("model.activation"));
  c = tiny_config(false);
  c.dropout = 1.0;
  CHECK_THROWS_WITH(Seq2Seq(c, g), Catch::Contains("model.dropout"));
}
