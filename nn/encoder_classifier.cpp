#include "nn/encoder_classifier.hpp"

#include "nn/hooks.hpp"
#include "nn/model_sites.hpp"
#include "nn/seq2seq.hpp"

namespace qkv::nn {

namespace {

const ModelConfig& validated_classifier(const ModelConfig& c) {
  c.validate();
  auto need = [](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw Error("model." + key + ": " + why);
  };
  need(c.tgt_vocab >= 2, "tgt_vocab",
       "an encoder classifier needs at least 2 classes, got " + std::to_string(c.tgt_vocab));
  need(c.encoder_layers >= 1, "encoder_layers", "an encoder classifier needs at least 1 layer");
  need(!c.tie_output, "tie_output", "an encoder classifier's classes are not tokens");
  need(!c.share_embeddings, "share_embeddings", "an encoder classifier has one embedding");
  return c;
}

// The bool (B, S) mask as (B, S, 1) weights valid / (real positions of the row), in dtype dt.
// Throws when a row has no real position.
Tensor mean_weights(const Tensor& valid, DType dt) {
  const Tensor v = valid.contiguous();
  const int64_t b = v.size(0), s = v.size(1);
  Tensor w = zeros({b, s, 1}, DType::f64);
  const uint8_t* in = v.data<uint8_t>();
  double* out = w.data<double>();
  for (int64_t i = 0; i < b; ++i) {
    int64_t real = 0;
    for (int64_t j = 0; j < s; ++j) real += in[i * s + j] != 0;
    QKV_CHECK(real > 0, "EncoderClassifier", "mean pooling: row ", i, " of src_valid ",
              valid.shape(), " has no real position");
    for (int64_t j = 0; j < s; ++j) out[i * s + j] = in[i * s + j] ? 1.0 / real : 0.0;
  }
  return w.to(dt);
}

void check_cls_real(const Tensor& valid) {
  const Tensor first = valid.select(1, 0).contiguous();  // (B)
  const uint8_t* p = first.data<uint8_t>();
  for (int64_t i = 0; i < first.size(0); ++i)
    QKV_CHECK(p[i] != 0, "EncoderClassifier", "cls pooling reads position 0, but row ", i,
              " of src_valid ", valid.shape(), " marks it padding");
}

}  // namespace

EncoderClassifier::EncoderClassifier(const ModelConfig& c, Generator& gen, Pooling pool)
    : Model(std::make_shared<Generator>(gen.next_u64()), ""),
      pooling(pool),
      logit_softcap(validated_classifier(c).logit_softcap) {
  embed = register_module(
      "embed", std::make_shared<Embedding>(c.src_vocab, c.d_model, gen, c.scale_embedding));
  pos = register_module("pos", std::make_shared<PositionalEncoding>(
                                   c.position, c.d_model, c.max_len, gen, c.dropout, dropout_gen_));
  blocks = register_module(
      "blocks", std::make_shared<Encoder>(c.encoder_layers, c.block(), c.final_norm || c.norm_first,
                                          gen, dropout_gen_));
  classifier = register_module("classifier", std::make_shared<Linear>(c.d_model, c.tgt_vocab, gen));
}

Var EncoderClassifier::encode(const Tensor& src, const Tensor& src_valid) const {
  QKV_CHECK(src.dim() == 2 && src.dtype() == DType::i64 && src.size(1) > 0, "EncoderClassifier",
            "src must be (B, S) int64 with S >= 1, got ", dtype_name(src.dtype()), " ",
            src.shape());
  QKV_CHECK(
      !src_valid.defined() || (src_valid.shape() == src.shape() && src_valid.dtype() == DType::b8),
      "EncoderClassifier", "src_valid ", src_valid.shape(), " must be bool like src ", src.shape());
  QKV_CHECK(src.size(1) <= max_positions(), "EncoderClassifier", "a sequence of ", src.size(1),
            " tokens is longer than the learned positions' max_len ", max_positions());
  const Var x = pos->forward(hook_point(embed->forward(src), "embed"));  // (B, S, d)
  return blocks->forward(x, src_valid.defined() ? key_padding_mask(src_valid) : Tensor());
}

Var EncoderClassifier::pool(const Var& h, const Tensor& valid) const {
  QKV_CHECK(h.dim() == 3 && (!valid.defined() || valid.shape() == Shape{h.size(0), h.size(1)}),
            "EncoderClassifier::pool", "h ", h.shape(), " must be (B, S, d) and valid ",
            valid.shape(), " (B, S)");
  switch (pooling) {
    case Pooling::cls:
      if (valid.defined()) check_cls_real(valid);
      return ag::narrow(h, 1, 0, 1);  // (B, 1, d)
    case Pooling::mean:
      if (!valid.defined()) return ag::mean(h, {1}, true);
      // sum_s h[b, s] valid[b, s] / (real positions of row b)
      return ag::sum(ag::mul(h, ag::constant(mean_weights(valid, h.dtype()))), {1}, true);
  }
  return h;
}

Var EncoderClassifier::head(const Var& pooled) const {
  return hook_point(soft_cap(classifier->forward(pooled), logit_softcap), "logits");
}

Var EncoderClassifier::features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                                const Tensor&) const {
  QKV_CHECK(!tgt_in.defined() ||
                (tgt_in.dim() == 2 && tgt_in.size(0) == src.size(0) && tgt_in.size(1) == 1),
            "EncoderClassifier", "one class per sequence: tgt_in must be (B, 1) for src ",
            src.shape(), ", got ", tgt_in.shape());
  const Var h = encode(src, src_valid);
  return hook_point(pool(h, src_valid), "pooled");
}

Var EncoderClassifier::forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                               const Tensor& tgt_valid) const {
  return head(features(src, tgt_in, src_valid, tgt_valid));
}

Var EncoderClassifier::classify(const Tensor& src, const Tensor& src_valid) const {
  return ag::select(forward(src, Tensor(), src_valid, Tensor()), 1, 0);  // (B, C)
}

Model::OutputLayer EncoderClassifier::output_layer() const {
  return {classifier->weight, classifier->bias, logit_softcap};
}

std::vector<AttentionSite> encoder_classifier_sites(const ModelConfig& c) {
  return {{"self", "self-attention", "blocks.", "attn", Side::input, Side::input, false,
           c.encoder_layers, c.heads, "query (token)", "key (token)", "encoder_self"}};
}

std::vector<AttentionSite> EncoderClassifier::attention_sites() const {
  ModelConfig c;  // the sizes the sites read, as built
  c.encoder_layers = static_cast<int64_t>(blocks->layers.size());
  c.heads = blocks->layers[0]->self_attn->heads;
  return encoder_classifier_sites(c);
}

const MultiHeadAttention& EncoderClassifier::attention_of(const AttentionSite& site,
                                                          int64_t layer) const {
  QKV_CHECK(
      site.name == "self" && layer >= 0 && layer < static_cast<int64_t>(blocks->layers.size()),
      "EncoderClassifier", "no attention '", site.name, "' at layer ", layer, " (self, layers 0..",
      blocks->layers.size() - 1, ")");
  return *blocks->layers[static_cast<size_t>(layer)]->self_attn;
}

Model::Stream EncoderClassifier::output_stream() const {
  return {"blocks.", static_cast<int64_t>(blocks->layers.size()), blocks->norm.get()};
}

std::vector<std::string> EncoderClassifier::hook_points() const {
  std::vector<std::string> out{"embed"};
  blocks->list_hooks(out);
  out.insert(out.end(), {"pooled", "logits"});
  return out;
}

}  // namespace qkv::nn
