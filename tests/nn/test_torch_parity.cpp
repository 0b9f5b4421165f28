// Parity with PyTorch: the same weights and inputs through qkv and through torch.nn give the
// same outputs and the same input and weight gradients.
//
// For each case this test builds the qkv module, writes its parameters, inputs, the sequence
// lengths and an upstream gradient R to <case>.in.safetensors, and computes the output and
// d(sum(out * R))/d(inputs, parameters) itself. Then tests/nn/reference_nn.py (run with
// /usr/bin/python3 and Debian's python3-torch) does the same with torch.nn, building the masks
// itself with torch (key_padding_mask from the lengths, generate_square_subsequent_mask), and
// writes <case>.out.safetensors, which is compared here tensor by tensor.
//
// Two sizes. Small cases (d_model 8, n <= 6) cover every layout cheaply. Large ones (d_model 32,
// 4 heads, 150 to 300 queries and keys) cross every tile boundary of the fused attention
// kernels in core/attention.cpp (64 queries per tile, 256 keys per forward tile, 128 per
// backward tile), with ragged last tiles and padding that empties whole key tiles of one batch
// entry. Options: GELU, attention without projection biases, LayerNorm eps 1e-3, pre-LN, and
// shared parameters (share_embeddings, tie_output: a tensor used two or three times must get
// the sum of its uses' gradients, as torch's autograd gives it).
//
// Error measure, per tensor: max|ours - torch| / max(max|torch|, 1e-2), at most 1e-9 in
// float64 and 2e-5 in float32. Each tensor is judged by its own magnitude: the absolute floor
// 1e-2 only guards against dividing by nothing (every tensor of these cases is above 0.04).
// One gradient is zero in exact arithmetic, the key projection's bias (softmax ignores a
// constant added to a row's scores): both sides hold rounding noise there, so it is checked to
// be noise, max|ours| and max|torch| below 1e-10 (float64) or 1e-3 (float32).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/precision.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// What one case hands to torch, and what qkv computed.
struct Prepared {
  json config;
  NamedTensors to_torch;               // param.*, input.*, R
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

// Model width and what the layers do; every case states its sequence lengths itself.
struct Dims {
  int64_t d, heads, d_ff;
};
const Dims kSmall{8, 2, 16};
const Dims kLarge{32, 4, 64};  // d_head 8

struct Options {
  bool norm_first = false;
  std::string activation = "relu";
  bool bias = true;  // attention projections (qkv's model.bias)
  double eps = 1e-5;
  bool attn_only = false;  // no FFN sublayer (qkv's model.attn_only)
};

json base_config(const std::string& kind, const Dims& d, const Options& o) {
  return {{"kind", kind},
          {"d_model", d.d},
          {"heads", d.heads},
          {"d_ff", d.d_ff},
          {"norm_first", o.norm_first},
          {"activation", o.activation},
          {"bias", o.bias},
          {"layer_norm_eps", o.eps},
          {"attn_only", o.attn_only}};
}

BlockConfig block_config(const Dims& d, const Options& o) {
  BlockConfig c;
  c.d_model = d.d, c.heads = d.heads, c.d_ff = d.d_ff, c.dropout = 0;
  c.norm_first = o.norm_first, c.activation = parse_activation(o.activation);
  c.bias = o.bias, c.layer_norm_eps = o.eps, c.attn_only = o.attn_only;
  return c;
}

// (B, m) valid mask -> (B, 1, 1, m), qkv's own convention (true = may attend).
Tensor padding(const std::vector<int64_t>& lengths, int64_t m) {
  return key_padding_mask(valid_mask(lengths, m));
}

// Self-attention (m == n) or cross-attention over keys of length m, padded to key_lengths.
struct MhaSpec {
  Dims dims;
  int64_t n, m;
  std::vector<int64_t> key_lengths;
  bool cross, causal, bias;
};

Prepared mha_case(DType dt, const MhaSpec& s, uint64_t seed) {
  Generator g(seed);
  MultiHeadAttention mha(s.dims.d, s.dims.heads, g, s.bias);
  mha.to(dt);
  perturb(mha, g);
  Options o;
  o.bias = s.bias;
  Prepared p;
  p.config = base_config("mha", s.dims, o);
  p.config["key_lengths"] = s.key_lengths;
  p.config["causal"] = s.causal;
  const Var q = float_input({static_cast<int64_t>(s.key_lengths.size()), s.n, s.dims.d}, g, dt);
  Tensor mask = padding(s.key_lengths, s.m);
  if (s.causal) mask = combine_masks(causal_mask(s.n, s.m), mask);
  if (s.cross) {
    const Var mem = float_input({q.size(0), s.m, s.dims.d}, g, dt);
    finish(p, mha.forward(q, mem, mem, mask), {{"query", q}, {"memory", mem}}, &mha, g);
  } else {
    finish(p, mha.forward(q, q, q, mask), {{"query", q}}, &mha, g);
  }
  return p;
}

// Sequence lengths of a layer or model case: targets (decoder side) and sources.
struct Lengths {
  int64_t T, S;
  std::vector<int64_t> tgt, src;
};

Prepared encoder_layer_case(DType dt, const Dims& d, const Lengths& L, const Options& o) {
  Generator g(31);
  TransformerEncoderBlock blk(block_config(d, o), g, nullptr);
  blk.to(dt);
  perturb(blk, g);
  Prepared p;
  p.config = base_config("encoder_layer", d, o);
  p.config["src_lengths"] = L.src;
  const Var x = float_input({static_cast<int64_t>(L.src.size()), L.S, d.d}, g, dt);
  finish(p, blk.forward(x, padding(L.src, L.S)), {{"x", x}}, &blk, g);
  return p;
}

Prepared decoder_layer_case(DType dt, const Dims& d, const Lengths& L, const Options& o) {
  Generator g(41);
  TransformerDecoderBlock blk(block_config(d, o), g, nullptr);
  blk.to(dt);
  perturb(blk, g);
  Prepared p;
  p.config = base_config("decoder_layer", d, o);
  p.config["tgt_lengths"] = L.tgt;
  p.config["src_lengths"] = L.src;
  const int64_t B = static_cast<int64_t>(L.tgt.size());
  const Var x = float_input({B, L.T, d.d}, g, dt), mem = float_input({B, L.S, d.d}, g, dt);
  const Var y = blk.forward(x, mem, combine_masks(causal_mask(L.T), padding(L.tgt, L.T)),
                            padding(L.src, L.S));
  finish(p, y, {{"x", x}, {"memory", mem}}, &blk, g);
  return p;
}

struct Sharing {
  bool share_embeddings = false, tie_output = false;
};

Prepared transformer_case(DType dt, const Dims& d, const Lengths& L, const Options& o,
                          Sharing sh = {}) {
  Generator g(51);
  ModelConfig c;
  c.src_vocab = sh.share_embeddings ? 9 : 11, c.tgt_vocab = 9;
  c.d_model = d.d, c.heads = d.heads, c.d_ff = d.d_ff;
  c.encoder_layers = 2, c.decoder_layers = 2, c.dropout = 0;
  c.norm_first = o.norm_first, c.activation = parse_activation(o.activation), c.bias = o.bias;
  c.layer_norm_eps = o.eps;
  c.final_norm = true;  // nn.Transformer always ends both stacks with a LayerNorm
  c.share_embeddings = sh.share_embeddings, c.tie_output = sh.tie_output;
  Seq2Seq m(c, g);
  m.to(dt);
  perturb(m, g);
  Prepared p;
  p.config = base_config("transformer", d, o);
  p.config.update({{"src_vocab", c.src_vocab},
                   {"tgt_vocab", c.tgt_vocab},
                   {"encoder_layers", c.encoder_layers},
                   {"decoder_layers", c.decoder_layers},
                   {"share_embeddings", c.share_embeddings},
                   {"tie_output", c.tie_output},
                   {"src_lengths", L.src},
                   {"tgt_lengths", L.tgt}});
  const int64_t B = static_cast<int64_t>(L.tgt.size());
  const Tensor src = randint({B, L.S}, 0, c.src_vocab, g),
               tgt = randint({B, L.T}, 0, c.tgt_vocab, g);
  const Var out = m.forward(src, tgt, valid_mask(L.src, L.S), valid_mask(L.tgt, L.T));
  finish(p, out, {{"src", Var(src)}, {"tgt", Var(tgt)}}, &m, g);
  return p;
}

// A decoder-only LM (GPT layout): against token embedding + position table +
// nn.TransformerEncoderLayer(norm_first, gelu) stack under torch's causal mask + LayerNorm +
// the tied head. t = 300 crosses the fused attention kernel's query tiles (64) and its
// forward (256) and backward (128) key tiles (core/attention.cpp). attn_only: blocks of the
// attention sublayer alone (reference_nn.py's AttnOnlyLayer).
Prepared gpt_case(DType dt, const Dims& d, int64_t b, int64_t t, bool bias,
                  bool attn_only = false) {
  Generator g(71);
  ModelConfig c = ModelConfig::decoder_defaults();
  c.src_vocab = c.tgt_vocab = 11, c.d_model = d.d, c.heads = d.heads, c.d_ff = d.d_ff;
  c.decoder_layers = 2, c.dropout = 0, c.max_len = t + 3, c.bias = bias, c.attn_only = attn_only;
  DecoderLM m(c, g, nullptr);
  m.to(dt);
  perturb(m, g);
  Prepared p;
  p.config = {{"kind", "gpt"},        {"d_model", d.d},       {"heads", d.heads},
              {"d_ff", d.d_ff},       {"vocab", c.tgt_vocab}, {"layers", c.decoder_layers},
              {"max_len", c.max_len}, {"bias", bias},         {"attn_only", attn_only}};
  const Tensor ids = randint({b, t}, 0, c.tgt_vocab, g);
  finish(p, m.forward(ids), {{"ids", Var(ids)}}, &m, g);
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

// Tolerances of the per-tensor error (see the top of the file).
constexpr double kFloor = 1e-2;
double tolerance(DType dt) { return dt == DType::f64 ? 1e-9 : 2e-5; }
double noise_bound(DType dt) { return dt == DType::f64 ? 1e-10 : 1e-3; }

// The gradients that are zero in exact arithmetic: every key projection's bias.
bool zero_in_exact_arithmetic(const std::string& name) {
  const std::string suffix = "w_k.bias";
  return name.rfind("grad.param.", 0) == 0 && name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct TensorError {
  std::string name;
  double err, max_abs, ours_max_abs;
};

// Each tensor torch returned against ours: max|a - b| / max(max|b|, kFloor); and every tensor
// we computed must have come back.
std::vector<TensorError> compare(const std::map<std::string, Tensor>& ours,
                                 const SafetensorsFile& theirs) {
  std::vector<TensorError> errors;
  std::set<std::string> seen;
  for (const auto& [n, b] : theirs.tensors) {
    INFO(n);
    const auto it = ours.find(n);
    REQUIRE(it != ours.end());
    const Tensor& a = it->second;
    REQUIRE(a.shape() == b.shape());
    REQUIRE(a.dtype() == b.dtype());
    const double mb = max(abs(b.to(DType::f64))).item();
    const double ma = max(abs(a.to(DType::f64))).item();
    const double diff = max_abs_diff(a.to(DType::f64), b.to(DType::f64));
    errors.push_back({n, std::isnan(diff) ? INFINITY : diff / std::max(mb, kFloor), mb, ma});
    seen.insert(n);
  }
  for (const auto& [n, t] : ours) {
    INFO("torch returned no " << n);
    CHECK(seen.count(n));
  }
  return errors;
}

using Make = std::function<Prepared(DType)>;

// Small cases: every layout at d_model 8 and n <= 6.
std::vector<std::pair<std::string, Make>> small_cases() {
  const Lengths enc{0, 5, {}, {5, 3}}, dec{4, 6, {4, 3}, {6, 4}}, model{5, 6, {5, 3}, {6, 4}};
  Options pre;
  pre.norm_first = true;
  Options attn_only_post, attn_only_pre = pre;
  attn_only_post.attn_only = attn_only_pre.attn_only = true;
  return {
      {"mha_self_causal_padding",
       [](DType dt) {
         return mha_case(dt, {kSmall, 5, 5, {5, 3}, false, true, true}, 22);
       }},
      {"mha_self_padding",
       [](DType dt) {
         return mha_case(dt, {kSmall, 5, 5, {5, 3}, false, false, true}, 23);
       }},
      {"mha_cross_padding",
       [](DType dt) {
         return mha_case(dt, {kSmall, 4, 6, {6, 4}, true, false, true}, 21);
       }},
      {"encoder_layer_post_ln", [=](DType dt) { return encoder_layer_case(dt, kSmall, enc, {}); }},
      {"encoder_layer_norm_first",
       [=](DType dt) { return encoder_layer_case(dt, kSmall, enc, pre); }},
      {"encoder_layer_attn_only_post_ln",
       [=](DType dt) { return encoder_layer_case(dt, kSmall, enc, attn_only_post); }},
      {"encoder_layer_attn_only_norm_first",
       [=](DType dt) { return encoder_layer_case(dt, kSmall, enc, attn_only_pre); }},
      {"decoder_layer_attn_only_post_ln",
       [=](DType dt) { return decoder_layer_case(dt, kSmall, dec, attn_only_post); }},
      {"decoder_layer_post_ln", [=](DType dt) { return decoder_layer_case(dt, kSmall, dec, {}); }},
      {"decoder_layer_norm_first",
       [=](DType dt) { return decoder_layer_case(dt, kSmall, dec, pre); }},
      {"transformer_post_ln", [=](DType dt) { return transformer_case(dt, kSmall, model, {}); }},
      {"transformer_norm_first",
       [=](DType dt) { return transformer_case(dt, kSmall, model, pre); }},
      {"transformer_tie_output",
       [=](DType dt) {
         return transformer_case(dt, kSmall, model, {}, {false, true});
       }},
      {"transformer_share_embeddings",
       [=](DType dt) {
         return transformer_case(dt, kSmall, model, pre, {true, false});
       }},
      {"transformer_share_and_tie",
       [=](DType dt) {
         return transformer_case(dt, kSmall, model, {}, {true, true});
       }},
      {"cross_entropy_smoothing_0.1_ignore_-100",
       [](DType dt) { return cross_entropy_case(dt, -100, 0.1); }},
      {"cross_entropy_smoothing_0.25_ignore_class_1",
       [](DType dt) { return cross_entropy_case(dt, 1, 0.25); }},
  };
}

// Large cases: across the fused kernels' tiles (64 queries; 256 keys forward, 128 backward).
// 300 = 4 * 64 + 44 = 256 + 44 = 2 * 128 + 44; 270 = 4 * 64 + 14; 150 = 2 * 64 + 22. Padding
// to 256 ends exactly at a tile edge; with 203, 199 and 129 real keys the last forward tile of
// that batch entry has no key at all (and with 129, the second backward tile only one).
// QKV_PARITY_VERBOSE=1 prints every tensor's error.
std::vector<std::pair<std::string, Make>> large_cases() {
  const Lengths enc{0, 300, {}, {300, 203}}, dec{270, 300, {270, 199}, {300, 129}};
  Options gelu_eps;  // post-LN, GELU, LayerNorm eps 1e-3
  gelu_eps.activation = "gelu", gelu_eps.eps = 1e-3;
  Options pre_nobias;  // pre-LN, attention without biases
  pre_nobias.norm_first = true, pre_nobias.bias = false;
  Options all = gelu_eps;
  all.norm_first = true, all.bias = false;
  return {
      {"L_mha_self_causal_padding_300",
       [](DType dt) {
         return mha_case(dt, {kLarge, 300, 300, {300, 256}, false, true, true}, 71);
       }},
      {"L_mha_cross_no_bias_150x300",
       [](DType dt) {
         return mha_case(dt, {kLarge, 150, 300, {300, 129}, true, false, false}, 72);
       }},
      {"L_encoder_layer_gelu_eps_300",
       [=](DType dt) { return encoder_layer_case(dt, kLarge, enc, gelu_eps); }},
      {"L_encoder_layer_norm_first_no_bias_300",
       [=](DType dt) { return encoder_layer_case(dt, kLarge, enc, pre_nobias); }},
      {"L_decoder_layer_post_ln_270x300",
       [=](DType dt) { return decoder_layer_case(dt, kLarge, dec, {}); }},
      {"L_decoder_layer_norm_first_gelu_no_bias_eps_270x300",
       [=](DType dt) { return decoder_layer_case(dt, kLarge, dec, all); }},
      {"L_transformer_gelu_eps_shared_tied_300x270",
       [=](DType dt) {
         return transformer_case(dt, kLarge, dec, gelu_eps, {true, true});
       }},
      {"L_transformer_norm_first_no_bias_300x270",
       [=](DType dt) { return transformer_case(dt, kLarge, dec, pre_nobias); }},
  };
}

}  // namespace

TEST_CASE(
    "nn matches PyTorch: MultiheadAttention, Transformer layers, nn.Transformer, cross_entropy, "
    "small and across the attention kernels' tiles",
    "[nn][reference]") {
  const char* src = std::getenv("QKV_SOURCE_DIR");
  REQUIRE(src != nullptr);
  const fs::path script = fs::path(src) / "tests/nn/reference_nn.py";
  REQUIRE(fs::exists(script));
  TempDir dir("torch_parity");

  std::vector<std::pair<std::string, Make>> cases = small_cases();
  for (auto& c : large_cases()) cases.push_back(std::move(c));
  std::map<std::string, std::pair<Prepared, DType>> prepared;
  // decoder-only LMs (the GPT layout); 300 positions cross the attention tiles
  cases.push_back({"gpt_decoder_only", [](DType dt) { return gpt_case(dt, kSmall, 2, 7, true); }});
  cases.push_back(
      {"gpt_decoder_only_no_bias", [](DType dt) { return gpt_case(dt, kSmall, 2, 5, false); }});
  cases.push_back({"L_gpt_decoder_only_300_positions",
                   [](DType dt) { return gpt_case(dt, kLarge, 1, 300, true); }});
  // attention-only LMs (model.attn_only)
  cases.push_back(
      {"gpt_attn_only", [](DType dt) { return gpt_case(dt, kSmall, 2, 7, true, true); }});
  cases.push_back({"L_gpt_attn_only_no_bias_300_positions",
                   [](DType dt) { return gpt_case(dt, kLarge, 1, 300, false, true); }});
  for (const auto& [name, make] : cases)
    for (DType dt : {DType::f32, DType::f64}) {
      const std::string id = name + (dt == DType::f32 ? ".f32" : ".f64");
      Prepared p = make(dt);
      p.config["dtype"] = dtype_name(dt);
      save_safetensors(dir.file(id + ".in.safetensors"), p.to_torch, {{"config", p.config.dump()}});
      prepared.emplace(id, std::make_pair(std::move(p), dt));
    }

  const ReferenceRun ref = run_reference(script, dir);
  INFO(ref.report());
  if (ref.status != 0)
    FAIL(
        "the PyTorch reference failed; /usr/bin/python3 needs Debian's python3-torch and "
        "python3-numpy (make install)");

  for (const auto& [id, pd] : prepared) {
    const auto& [p, dt] = pd;
    const SafetensorsFile theirs = load_safetensors(dir.file(id + ".out.safetensors"));
    const std::vector<TensorError> errors = compare(p.ours, theirs);
    const TensorError* worst = &errors.front();
    int zeros = 0;
    for (const TensorError& e : errors) {
      if (zero_in_exact_arithmetic(e.name)) {
        INFO(id << ": " << e.name << " is zero in exact arithmetic; max|ours| " << e.ours_max_abs
                << ", max|torch| " << e.max_abs << ", bound " << noise_bound(dt));
        CHECK(e.ours_max_abs <= noise_bound(dt));
        CHECK(e.max_abs <= noise_bound(dt));
        ++zeros;
        continue;
      }
      INFO(id << ": " << e.name << " (max|torch| " << e.max_abs << "): error " << e.err
              << ", tolerance " << tolerance(dt));
      CHECK(e.err <= tolerance(dt));
      if (!(e.err <= worst->err) || zero_in_exact_arithmetic(worst->name)) worst = &e;
    }
    CHECK(zeros < static_cast<int>(errors.size()));
    std::printf("nn reference %-56s worst err %.3g (%s), %zu tensors\n", id.c_str(), worst->err,
                worst->name.c_str(), errors.size());
    if (std::getenv("QKV_PARITY_VERBOSE"))
      for (const TensorError& e : errors)
        std::printf("  %-60s max|torch| %-10.3g err %.3g\n", e.name.c_str(), e.max_abs, e.err);
  }
}

// Mixed precision: qkv's DecoderLM under PrecisionScope(bf16) against the GPT layout under
// torch.autocast("cpu", dtype=torch.bfloat16), both from the same float32 weights. The two
// round differently (autocast also rounds the linear layers' outputs; both run attention's
// products in bf16, qkv with f32 statistics), so the bound is bf16's: a few
// units of its 2^-8 relative precision on the output, more on gradients, where autocast's
// bf16-rounded intermediate results compound (up to 5% on a small case's query projection).
// The large case crosses the attention tiles.
TEST_CASE("nn matches PyTorch autocast: the GPT layout in bf16, forward and gradients",
          "[nn][reference]") {
  SKIP_WITHOUT_BF16();
  const char* src = std::getenv("QKV_SOURCE_DIR");
  REQUIRE(src != nullptr);
  const fs::path script = fs::path(src) / "tests/nn/reference_nn.py";
  TempDir dir("torch_autocast");
  std::map<std::string, Prepared> prepared;
  const std::pair<std::string, std::function<Prepared()>> cases[] = {
      {"gpt_bf16", [] { return gpt_case(DType::f32, kSmall, 2, 7, true); }},
      {"L_gpt_bf16_300_positions", [] { return gpt_case(DType::f32, kLarge, 1, 300, true); }},
  };
  for (const auto& [id, make] : cases) {
    PrecisionScope bf16(Precision::bf16);
    Prepared p = make();
    p.config["dtype"] = "float32";
    p.config["autocast"] = true;
    save_safetensors(dir.file(id + ".in.safetensors"), p.to_torch, {{"config", p.config.dump()}});
    prepared.emplace(id, std::move(p));
  }
  const ReferenceRun ref = run_reference(script, dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  constexpr double kBf16OutputTolerance = 2e-2, kBf16GradTolerance = 8e-2;
  for (const auto& [id, p] : prepared) {
    const std::vector<TensorError> errors =
        compare(p.ours, load_safetensors(dir.file(id + ".out.safetensors")));
    double worst = 0;
    for (const TensorError& e : errors) {
      INFO(id << ": " << e.name << " (max|torch| " << e.max_abs << "): error " << e.err);
      if (zero_in_exact_arithmetic(e.name)) {
        // only rounding is left (the key bias shifts every score of a row alike): with
        // attention's products in bf16, bf16's rounding; no more of it than autocast's own
        CHECK(e.ours_max_abs <= std::max(noise_bound(DType::f32), 2 * e.max_abs));
        continue;
      }
      CHECK(e.err <= (e.name == "out" ? kBf16OutputTolerance : kBf16GradTolerance));
      worst = std::max(worst, e.err);
    }
    std::printf("nn autocast reference %-40s worst err %.3g, %zu tensors\n", id.c_str(), worst,
                errors.size());
  }
}
