// Parity with PyTorch of the encoder-only classifier (nn::EncoderClassifier): the same weights
// and token ids through qkv and through torch.nn (tests/nn/reference_encoder_classifier.py,
// /usr/bin/python3 with Debian's python3-torch) give the same logits, or the same loss, and the
// same gradient for every parameter, in float32 and float64.
//
// Each case writes qkv's parameters, the ids, the sequence lengths (torch builds its padding
// mask from them) and an upstream gradient R to <case>.in.safetensors, and computes out and
// d(sum(out * R))/d(parameters) itself. Cases: both poolings, post-LN and pre-LN, sinusoidal
// and learned positions, GELU, attention without biases, LayerNorm eps 1e-3, padding in every
// batch; the loss cases go through Model::forward_loss (the fused output layer and loss). The
// large ones cross the fused attention kernel's tiles (core/attention.cpp: 64 queries a tile,
// 256 keys forward, 128 backward): S = 65 = 64 + 1, with one row padded to exactly 64; and
// S = 260 = 256 + 4 = 2 * 128 + 4, with a row of 129 real keys (one in the second backward
// tile, none in the third) at d_model 96 and 6 heads.
//
// Error per tensor, as test_torch_parity.cpp: max|ours - torch| / max(max|torch|, 1e-2), at
// most 2e-5 in float32 and 1e-9 in float64; the key projection's bias, whose gradient is zero
// in exact arithmetic (softmax ignores a constant added to a row), is checked to be noise.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "nn/encoder_classifier.hpp"
#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using nlohmann::json;

namespace {

struct Spec {
  int64_t d, heads, d_ff, S;
  std::vector<int64_t> lengths;
  Pooling pool;
  bool norm_first = false, final_norm = false, learned = false, bias = true, loss = false;
  std::string activation = "relu";
  double eps = 1e-5;
};

constexpr int64_t kVocab = 13, kClasses = 5, kLayers = 2;

ModelConfig config_of(const Spec& s) {
  ModelConfig c;
  c.src_vocab = kVocab, c.tgt_vocab = kClasses;
  c.d_model = s.d, c.heads = s.heads, c.d_ff = s.d_ff, c.encoder_layers = kLayers;
  c.dropout = 0, c.norm_first = s.norm_first, c.final_norm = s.final_norm;
  c.position = s.learned ? PositionKind::learned : PositionKind::sinusoidal;
  c.max_len = s.S + 7, c.bias = s.bias, c.layer_norm_eps = s.eps;
  c.activation = parse_activation(s.activation);
  return c;
}

json torch_config(const Spec& s, DType dt) {
  return {{"d_model", s.d},
          {"heads", s.heads},
          {"d_ff", s.d_ff},
          {"layers", kLayers},
          {"src_vocab", kVocab},
          {"classes", kClasses},
          {"norm_first", s.norm_first},
          {"final_norm", s.final_norm || s.norm_first},
          {"position", s.learned ? "learned" : "sinusoidal"},
          {"max_len", s.S + 7},
          {"bias", s.bias},
          {"activation", s.activation},
          {"layer_norm_eps", s.eps},
          {"pool", std::string(name_of(s.pool))},
          {"loss", s.loss},
          {"src_lengths", s.lengths},
          {"dtype", dtype_name(dt)}};
}

struct Prepared {
  NamedTensors to_torch;
  std::map<std::string, Tensor> ours;
  json config;
};

Prepared prepare(const Spec& s, DType dt, uint64_t seed) {
  Generator g(seed);
  EncoderClassifier m(config_of(s), g, s.pool);
  m.to(dt);
  for (Var p : m.parameters())  // away from the init: zero biases, unit gains hide mistakes
    p.data() = add(p.data(), mul(randn(p.shape(), g, dt), 0.2));
  const int64_t B = static_cast<int64_t>(s.lengths.size());
  const Tensor src = randint({B, s.S}, 0, kVocab, g), valid = valid_mask(s.lengths, s.S);
  const Tensor labels = randint({B, 1}, 0, kClasses, g);
  const Tensor tgt_in = zeros({B, 1}, DType::i64);
  const Var out = s.loss ? m.forward_loss(src, tgt_in, valid, Tensor(), labels, -100, 0.0)
                         : m.forward(src, tgt_in, valid, Tensor());
  Prepared p;
  p.config = torch_config(s, dt);
  const Tensor R = randn(out.shape(), g, dt);
  p.to_torch = {{"input.src", src}, {"input.labels", labels.flatten()}, {"R", R}};
  std::vector<Var> wrt;
  for (const auto& [n, v] : m.named_parameters()) {
    p.to_torch.push_back({"param." + n, v.data()});
    wrt.push_back(v);
  }
  const std::vector<Tensor> grads = ag::grad({out}, {R}, wrt);
  p.ours["out"] = out.data();
  for (size_t i = 0; i < wrt.size(); ++i)
    p.ours["grad.param." + m.named_parameters()[i].first] = grads[i];
  return p;
}

std::vector<std::pair<std::string, Spec>> cases() {
  Spec small{8, 2, 16, 6, {6, 4, 2}, Pooling::cls};
  Spec small_mean = small;
  small_mean.pool = Pooling::mean, small_mean.norm_first = true, small_mean.learned = true;
  small_mean.activation = "gelu";
  Spec small_loss = small;
  small_loss.loss = true, small_loss.final_norm = true;
  // S = 65: one row padded to exactly the first query tile's 64
  Spec l65{64, 4, 128, 65, {65, 64, 33}, Pooling::cls};
  l65.final_norm = true, l65.activation = "gelu", l65.eps = 1e-3;
  Spec l65_loss{64, 8, 96, 65, {65, 17, 40}, Pooling::mean};
  l65_loss.loss = true;
  // S = 260: past the forward key tile (256) and two backward ones (128)
  Spec l260{96, 6, 192, 260, {260, 129, 200}, Pooling::mean};
  l260.norm_first = true, l260.learned = true, l260.bias = false;
  Spec l260_cls = l260;
  l260_cls.pool = Pooling::cls, l260_cls.norm_first = false, l260_cls.lengths = {129, 260, 3};
  return {{"small_cls_post_ln", small},
          {"small_mean_pre_ln_learned_gelu", small_mean},
          {"small_loss_cls_final_norm", small_loss},
          {"L_cls_post_ln_final_norm_gelu_eps_65", l65},
          {"L_loss_mean_65", l65_loss},
          {"L_mean_pre_ln_learned_no_bias_260", l260},
          {"L_cls_post_ln_learned_no_bias_260", l260_cls}};
}

constexpr double kFloor = 1e-2;
double tolerance(DType dt) { return dt == DType::f64 ? 1e-9 : 2e-5; }
double noise_bound(DType dt) { return dt == DType::f64 ? 1e-10 : 1e-3; }

bool zero_in_exact_arithmetic(const std::string& name) {
  const std::string suffix = "w_k.bias";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every tensor of ours against torch's: returns the worst error, prints it.
void compare(const std::string& id, DType dt, const std::map<std::string, Tensor>& ours,
             const SafetensorsFile& theirs) {
  REQUIRE(theirs.tensors.size() == ours.size());
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, a] : ours) {
    INFO(id << ": " << name);
    const Tensor b = theirs.get(name);
    REQUIRE(a.shape() == b.shape());
    REQUIRE(a.dtype() == b.dtype());
    const double mb = max(abs(b.to(DType::f64))).item();
    if (zero_in_exact_arithmetic(name)) {
      CHECK(max(abs(a.to(DType::f64))).item() <= noise_bound(dt));
      CHECK(mb <= noise_bound(dt));
      continue;
    }
    const double err = max_abs_diff(a.to(DType::f64), b.to(DType::f64)) / std::max(mb, kFloor);
    INFO("max|torch| " << mb << ", error " << err << ", tolerance " << tolerance(dt));
    CHECK(err <= tolerance(dt));
    if (!(err <= worst)) worst = err, worst_name = name;
  }
  std::printf("encoder classifier reference %-44s worst err %.3g (%s), %zu tensors\n", id.c_str(),
              worst, worst_name.c_str(), ours.size());
}

}  // namespace

TEST_CASE("EncoderClassifier matches PyTorch: logits, loss and every gradient, across the tiles",
          "[nn][reference]") {
  TempDir dir("encoder_classifier_ref");
  std::map<std::string, std::pair<Prepared, DType>> prepared;
  uint64_t seed = 80;
  for (const auto& [name, spec] : cases())
    for (DType dt : {DType::f32, DType::f64}) {
      const std::string id = name + (dt == DType::f32 ? ".f32" : ".f64");
      Prepared p = prepare(spec, dt, ++seed);
      save_safetensors(dir.file(id + ".in.safetensors"), p.to_torch, {{"config", p.config.dump()}});
      prepared.emplace(id, std::make_pair(std::move(p), dt));
    }
  const ReferenceRun ref =
      run_reference(source_path("tests/nn/reference_encoder_classifier.py"), dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const auto& [id, pd] : prepared)
    compare(id, pd.second, pd.first.ours, load_safetensors(dir.file(id + ".out.safetensors")));
}
