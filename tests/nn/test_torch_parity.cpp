// Parity with PyTorch: the same weights and inputs through qkv and through torch.nn give the
// same outputs and the same input and weight gradients.
//
// For each case this test builds the qkv module, writes its parameters, inputs, masks (qkv's
// convention, true = may attend) and an upstream gradient R to <case>.in.safetensors, and
// computes the output and d(sum(out * R))/d(inputs, parameters) itself. Then
// tests/nn/reference_nn.py (run with /usr/bin/python3 and Debian's python3-torch) does the same
// with torch.nn and writes <case>.out.safetensors, which is compared here tensor by tensor.
//
// Error measure, per tensor: max|ours - torch| / max|torch|. Gradients that are zero in exact
// arithmetic (the key projection's bias: softmax ignores a constant added to a row) are
// rounding noise on both sides; for a tensor whose max|torch| is below 1e-3 of the case's
// largest reference magnitude, the error is taken relative to that largest magnitude instead.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "nn/safetensors.hpp"
#include "nn_test_util.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::nn::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// What one case hands to torch, and what qkv computed.
struct Prepared {
  json config;
  NamedTensors to_torch;               // param.*, input.*, mask.*, R
  std::map<std::string, Tensor> ours;  // out, grad.input.*, grad.param.*
};

// Moves every parameter away from its initial value (zero biases, unit LayerNorm gains would
// hide mistakes in how they are used).
void perturb(Module& m, Generator& g) {
  for (Var p : m.parameters()) p.data() = add(p.data(), mul(randn(p.shape(), g, p.dtype()), 0.2));
}

// Runs backward of sum(out * R) for the floating inputs and every parameter of m (m may be
// null), filling p.ours and p.to_torch.
void finish(Prepared& p, const Var& out, const std::vector<std::pair<std::string, Var>>& inputs,
            const Module* m, Generator& g) {
  const Tensor R = randn(out.shape(), g, out.dtype());
  std::vector<Var> wrt;
  std::vector<std::string> names;
  for (const auto& [n, v] : inputs) {
    p.to_torch.push_back({"input." + n, v.data()});
    if (v.requires_grad()) wrt.push_back(v), names.push_back("grad.input." + n);
  }
  if (m)
    for (const auto& [n, v] : m->named_parameters()) {
      p.to_torch.push_back({"param." + n, v.data()});
      wrt.push_back(v), names.push_back("grad.param." + n);
    }
  p.to_torch.push_back({"R", R});
  const std::vector<Tensor> grads = ag::grad({out}, {R}, wrt);
  p.ours["out"] = out.data();
  for (size_t i = 0; i < grads.size(); ++i) p.ours[names[i]] = grads[i];
}

Var float_input(const Shape& s, Generator& g, DType dt) { return Var(randn(s, g, dt), true); }

const int64_t D = 8, H = 2, DFF = 16;

Prepared mha_case(DType dt, bool cross, bool causal) {
  Generator g(cross ? 21 : causal ? 22 : 23);
  MultiHeadAttention mha(D, H, g);
  mha.to(dt);
  perturb(mha, g);
  Prepared p;
  p.config = {{"kind", "mha"}, {"d_model", D}, {"heads", H}};
  const int64_t n = cross ? 4 : 5, m = cross ? 6 : 5;
  const Var q = float_input({2, n, D}, g, dt);
  const Tensor valid = valid_mask({m, m - 2}, m);
  Tensor mask = key_padding_mask(valid);
  p.to_torch.push_back({"mask.key_valid", valid});
  if (causal) {
    mask = combine_masks(causal_mask(n, m), mask);
    p.to_torch.push_back({"mask.attn", causal_mask(n, m)});
  }
  if (cross) {
    const Var mem = float_input({2, m, D}, g, dt);
    finish(p, mha.forward(q, mem, mem, mask), {{"query", q}, {"memory", mem}}, &mha, g);
  } else {
    finish(p, mha.forward(q, q, q, mask), {{"query", q}}, &mha, g);
  }
  return p;
}

BlockConfig block_config(bool norm_first) {
  BlockConfig c;
  c.d_model = D, c.heads = H, c.d_ff = DFF, c.dropout = 0, c.norm_first = norm_first;
  return c;
}

Prepared encoder_layer_case(DType dt, bool norm_first) {
  Generator g(31);
  TransformerEncoderBlock blk(block_config(norm_first), g, nullptr);
  blk.to(dt);
  perturb(blk, g);
  Prepared p;
  p.config = {{"kind", "encoder_layer"},
              {"d_model", D},
              {"heads", H},
              {"d_ff", DFF},
              {"norm_first", norm_first}};
  const Var x = float_input({2, 5, D}, g, dt);
  const Tensor valid = valid_mask({5, 3}, 5);
  p.to_torch.push_back({"mask.key_valid", valid});
  finish(p, blk.forward(x, key_padding_mask(valid)), {{"x", x}}, &blk, g);
  return p;
}

Prepared decoder_layer_case(DType dt, bool norm_first) {
  Generator g(41);
  TransformerDecoderBlock blk(block_config(norm_first), g, nullptr);
  blk.to(dt);
  perturb(blk, g);
  Prepared p;
  p.config = {{"kind", "decoder_layer"},
              {"d_model", D},
              {"heads", H},
              {"d_ff", DFF},
              {"norm_first", norm_first}};
  const Var x = float_input({2, 4, D}, g, dt), mem = float_input({2, 6, D}, g, dt);
  const Tensor tv = valid_mask({4, 3}, 4), sv = valid_mask({6, 4}, 6);
  p.to_torch.push_back({"mask.causal", causal_mask(4)});
  p.to_torch.push_back({"mask.tgt_valid", tv});
  p.to_torch.push_back({"mask.src_valid", sv});
  const Var y = blk.forward(x, mem, combine_masks(causal_mask(4), key_padding_mask(tv)),
                            key_padding_mask(sv));
  finish(p, y, {{"x", x}, {"memory", mem}}, &blk, g);
  return p;
}

Prepared transformer_case(DType dt, bool norm_first) {
  Generator g(51);
  ModelConfig c;
  c.src_vocab = 11, c.tgt_vocab = 9, c.d_model = D, c.heads = H, c.d_ff = DFF;
  c.encoder_layers = 2, c.decoder_layers = 2, c.dropout = 0;
  c.norm_first = norm_first;
  c.final_norm = true;  // nn.Transformer always ends both stacks with a LayerNorm
  Seq2Seq m(c, g);
  m.to(dt);
  perturb(m, g);
  Prepared p;
  p.config = {{"kind", "transformer"},
              {"d_model", D},
              {"heads", H},
              {"d_ff", DFF},
              {"norm_first", norm_first},
              {"src_vocab", c.src_vocab},
              {"tgt_vocab", c.tgt_vocab},
              {"encoder_layers", c.encoder_layers},
              {"decoder_layers", c.decoder_layers}};
  const Tensor src = randint({2, 6}, 0, c.src_vocab, g), tgt = randint({2, 5}, 0, c.tgt_vocab, g);
  const Tensor sv = valid_mask({6, 4}, 6), tv = valid_mask({5, 3}, 5);
  p.to_torch.push_back({"mask.src_valid", sv});
  p.to_torch.push_back({"mask.tgt_valid", tv});
  finish(p, m.forward(src, tgt, sv, tv), {{"src", Var(src)}, {"tgt", Var(tgt)}}, &m, g);
  return p;
}

Prepared cross_entropy_case(DType dt, int64_t ignore_index, double smoothing) {
  Generator g(61);
  Prepared p;
  p.config = {
      {"kind", "cross_entropy"}, {"ignore_index", ignore_index}, {"label_smoothing", smoothing}};
  const Var logits(mul(randn({7, 5}, g, dt), 2.0), true);
  // two or three rows carry the ignored index
  const Tensor t = ignore_index == -100
                       ? from_vector<int64_t>({0, -100, 4, 1, 3, -100, 2}, {7})
                       : from_vector<int64_t>({0, 1, 4, ignore_index, 3, 2, 1}, {7});
  finish(p, ag::cross_entropy(logits, t, ignore_index, smoothing),
         {{"logits", logits}, {"targets", Var(t)}}, nullptr, g);
  return p;
}

struct Worst {
  double rel = 0;
  std::string tensor;
};

Worst compare(const std::map<std::string, Tensor>& ours, const SafetensorsFile& theirs) {
  double scale = 0;
  for (const auto& [n, t] : theirs.tensors)
    scale = std::max(scale, max(abs(t.to(DType::f64))).item());
  REQUIRE(scale > 0);
  Worst w;
  std::set<std::string> seen;
  for (const auto& [n, b] : theirs.tensors) {
    INFO(n);
    const auto it = ours.find(n);
    REQUIRE(it != ours.end());
    const Tensor& a = it->second;
    REQUIRE(a.shape() == b.shape());
    REQUIRE(a.dtype() == b.dtype());
    const double mb = max(abs(b.to(DType::f64))).item();
    const double err =
        max_abs_diff(a.to(DType::f64), b.to(DType::f64)) / (mb >= 1e-3 * scale ? mb : scale);
    if (!std::isnan(w.rel) && !(err <= w.rel)) w = {err, n};  // the first NaN is the worst
    seen.insert(n);
  }
  for (const auto& [n, t] : ours) {
    INFO("torch returned no " << n);
    CHECK(seen.count(n));
  }
  return w;
}

}  // namespace

TEST_CASE(
    "nn matches PyTorch: MultiheadAttention, Transformer layers, nn.Transformer, cross_entropy",
    "[nn][reference]") {
  const char* src = std::getenv("QKV_SOURCE_DIR");
  REQUIRE(src != nullptr);
  const fs::path script = fs::path(src) / "tests/nn/reference_nn.py";
  REQUIRE(fs::exists(script));
  TempDir dir("torch_parity");

  std::vector<std::pair<std::string, std::function<Prepared(DType)>>> cases = {
      {"mha_self_causal_padding", [](DType dt) { return mha_case(dt, false, true); }},
      {"mha_self_padding", [](DType dt) { return mha_case(dt, false, false); }},
      {"mha_cross_padding", [](DType dt) { return mha_case(dt, true, false); }},
      {"encoder_layer_post_ln", [](DType dt) { return encoder_layer_case(dt, false); }},
      {"encoder_layer_norm_first", [](DType dt) { return encoder_layer_case(dt, true); }},
      {"decoder_layer_post_ln", [](DType dt) { return decoder_layer_case(dt, false); }},
      {"decoder_layer_norm_first", [](DType dt) { return decoder_layer_case(dt, true); }},
      {"transformer_post_ln", [](DType dt) { return transformer_case(dt, false); }},
      {"transformer_norm_first", [](DType dt) { return transformer_case(dt, true); }},
      {"cross_entropy_smoothing_0.1_ignore_-100",
       [](DType dt) { return cross_entropy_case(dt, -100, 0.1); }},
      {"cross_entropy_smoothing_0.25_ignore_class_1",
       [](DType dt) { return cross_entropy_case(dt, 1, 0.25); }},
  };
  std::map<std::string, Prepared> prepared;
  for (const auto& [name, make] : cases)
    for (DType dt : {DType::f32, DType::f64}) {
      const std::string id = name + (dt == DType::f32 ? ".f32" : ".f64");
      Prepared p = make(dt);
      p.config["dtype"] = dtype_name(dt);
      save_safetensors(dir.file(id + ".in.safetensors"), p.to_torch, {{"config", p.config.dump()}});
      prepared.emplace(id, std::move(p));
    }

  const std::string log = dir.file("python.log");
  const std::string cmd =
      "/usr/bin/python3 '" + script.string() + "' '" + dir.path.string() + "' > '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(log).rdbuf();
  INFO("command: " << cmd << "\nexit status " << rc << "\noutput:\n" << out.str());
  if (rc != 0)
    FAIL(
        "the PyTorch reference failed; /usr/bin/python3 needs Debian's python3-torch and "
        "python3-numpy (make install)");

  for (const auto& [id, p] : prepared) {
    const SafetensorsFile theirs = load_safetensors(dir.file(id + ".out.safetensors"));
    const Worst w = compare(p.ours, theirs);
    const bool f64 = id.substr(id.size() - 4) == ".f64";
    const double tol = f64 ? 1e-9 : 1e-5;
    std::printf("nn reference %-50s worst rel err %.3g (%s), %zu tensors\n", id.c_str(), w.rel,
                w.tensor.c_str(), theirs.tensors.size());
    INFO(id << ": worst relative error " << w.rel << " in " << w.tensor);
    CHECK(w.rel <= tol);
  }
}
