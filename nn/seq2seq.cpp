#include "nn/seq2seq.hpp"

#include <cmath>

#include "nn/hooks.hpp"
#include "nn/model_cost.hpp"
#include "nn/model_sites.hpp"

namespace qkv::nn {

void ModelConfig::validate() const {
  auto need = [](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw Error("model." + key + ": " + why);
  };
  need(src_vocab > 0, "src_vocab", "must be positive, got " + std::to_string(src_vocab));
  need(tgt_vocab > 0, "tgt_vocab", "must be positive, got " + std::to_string(tgt_vocab));
  need(d_model > 0, "d_model", "must be positive, got " + std::to_string(d_model));
  need(heads > 0, "heads", "must be positive, got " + std::to_string(heads));
  need(
      d_model % heads == 0, "heads",
      "d_model " + std::to_string(d_model) + " is not divisible by heads " + std::to_string(heads));
  need(attn_only || d_ff > 0, "d_ff", "must be positive, got " + std::to_string(d_ff));
  need(encoder_layers >= 0, "encoder_layers", "must be >= 0");
  if (encoder != EncoderKind::attention) {
    const std::string kind_name(name_of(encoder));
    need(kind == ModelKind::encoder_decoder, "encoder",
         "\"" + kind_name + "\" is an encoder-decoder's encoder; model.kind = \"" +
             std::string(name_of(kind)) + "\" takes only \"attention\"");
    need(encoder_layers >= 1, "encoder_layers",
         "a " + kind_name + " encoder needs at least 1 layer");
    need(encoder == EncoderKind::conv || d_model % 2 == 0, "d_model",
         "a bidirectional " + kind_name + " encoder splits d_model between its two directions: " +
             std::to_string(d_model) + " must be even");
  }
  need(decoder_layers > 0, "decoder_layers", "must be >= 1");
  if (decoder == DecoderKind::gru) validate_recurrent_decoder();
  need(decoder == DecoderKind::gru || cross_attention, "cross_attention",
       "false needs decoder = \"gru\" (a Transformer decoder reads the source only through "
       "cross-attention)");
  need(dropout >= 0 && dropout < 1, "dropout", "must be in [0, 1), got " + std::to_string(dropout));
  need(attention_dropout >= 0 && attention_dropout < 1, "attention_dropout", "must be in [0, 1)");
  need(relative_clip >= 1, "relative_clip", "must be >= 1, got " + std::to_string(relative_clip));
  need(max_len > 0, "max_len", "must be positive");
  need(!share_embeddings || src_vocab == tgt_vocab, "share_embeddings",
       "needs one vocabulary for source and target (got " + std::to_string(src_vocab) + " and " +
           std::to_string(tgt_vocab) + ")");
  need(layer_norm_eps > 0, "layer_norm_eps", "must be positive");
  need(std::isfinite(logit_softcap) && logit_softcap >= 0, "logit_softcap",
       "must be >= 0 (0: off), got " + std::to_string(logit_softcap));
  need(window >= 0, "window", "must be >= 0 (0: full attention), got " + std::to_string(window));
  if (const auto c = attention_conflict(attention, position, window, attention_dropout,
                                        d_model / heads, attention_scale))
    need(false, c->key, c->why);
}

ModelConfig ModelConfig::decoder_defaults() {
  ModelConfig c;
  c.kind = ModelKind::decoder;
  c.position = PositionKind::learned;
  c.norm_first = true;
  c.final_norm = true;
  c.activation = Activation::gelu;
  c.scale_embedding = false;
  c.tie_output = true;
  return c;
}

BlockConfig ModelConfig::block() const {
  BlockConfig b;
  b.d_model = d_model;
  b.heads = heads;
  b.d_ff = d_ff;
  b.attn_only = attn_only;
  b.dropout = dropout;
  b.attention_dropout = attention_dropout;
  b.norm_first = norm_first;
  b.layer_norm_eps = layer_norm_eps;
  b.norm = norm;
  b.qk_norm = qk_norm;
  b.activation = activation;
  b.scale = attention_scale;
  b.bias = bias;
  b.attention = attention;
  b.window = window;
  b.position = position;
  b.relative_clip = relative_clip;
  return b;
}

Seq2Seq::Seq2Seq(const ModelConfig& c, Generator& gen)
    : EncoderDecoder(std::make_shared<Generator>(gen.next_u64()), ""), config(c) {
  c.validate();
  QKV_CHECK(c.kind == ModelKind::encoder_decoder, "Seq2Seq",
            "model.kind = \"decoder\" is a language model: nn::DecoderLM, not Seq2Seq");
  QKV_CHECK(c.decoder == DecoderKind::attention, "Seq2Seq",
            "model.decoder = \"gru\" is nn::RecurrentSeq2Seq");
  src_embed = register_module(
      "src_embed", std::make_shared<Embedding>(c.src_vocab, c.d_model, gen, c.scale_embedding));
  tgt_embed =
      c.share_embeddings
          ? src_embed
          : register_module("tgt_embed", std::make_shared<Embedding>(c.tgt_vocab, c.d_model, gen,
                                                                     c.scale_embedding));
  const PositionKind pk = c.position;
  src_pos = register_module("src_pos", std::make_shared<PositionalEncoding>(
                                           pk, c.d_model, c.max_len, gen, c.dropout, dropout_gen_));
  tgt_pos = register_module("tgt_pos", std::make_shared<PositionalEncoding>(
                                           pk, c.d_model, c.max_len, gen, c.dropout, dropout_gen_));
  const bool final_norm = c.final_norm || c.norm_first;
  if (c.encoder == EncoderKind::attention) {
    encoder = register_module("encoder", std::make_shared<Encoder>(c.encoder_layers, c.block(),
                                                                   final_norm, gen, dropout_gen_));
  } else {  // no Transformer blocks: an empty Encoder (no parameters) keeps the sites' code plain
    encoder = std::make_shared<Encoder>(0, c.block(), false, gen, dropout_gen_);
    sequence_encoder = register_module(
        "encoder",
        std::make_shared<SequenceEncoder>(
            SequenceEncoderOptions{c.encoder, c.d_model, c.encoder_layers, c.norm, c.activation},
            gen));
    sequence_encoder->name_hooks("encoder.");
  }
  decoder = register_module("decoder", std::make_shared<Decoder>(c.decoder_layers, c.block(),
                                                                 final_norm, gen, dropout_gen_));
  if (!c.tie_output)
    output = register_module("output", std::make_shared<Linear>(c.d_model, c.tgt_vocab, gen));
  encoder->name_hooks("encoder.");  // the decoder's are "decoder." from the start
}

Var Seq2Seq::project(const Var& h) const {
  const Var logits =
      output ? output->forward(h) : ag::linear(h, tgt_embed->weight);  // tied: logits = h E^T
  return hook_point(soft_cap(logits, config.logit_softcap), "logits");
}

Var Seq2Seq::encode(const Tensor& src, const Tensor& src_valid) const {
  QKV_CHECK(src.dim() == 2 && src_valid.shape() == src.shape(), "Seq2Seq::encode", "src ",
            src.shape(), " and src_valid ", src_valid.shape(), " must both be (B, S)");
  ag::ModuleScope scope("encoder");
  const Var x = src_pos->forward(hook_point(src_embed->forward(src), "encoder.embed"));
  if (sequence_encoder) return sequence_encoder->forward(x, src_valid);
  return encoder->forward(x, key_padding_mask(src_valid));
}

Var Seq2Seq::decode(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in,
                    const Tensor& tgt_valid) const {
  const Var h = decode_features(memory, src_valid, tgt_in, tgt_valid);
  ag::ModuleScope scope("decoder");
  return project(h);
}

Var Seq2Seq::decode_features(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in,
                             const Tensor& tgt_valid) const {
  QKV_CHECK(tgt_in.dim() == 2 && tgt_valid.shape() == tgt_in.shape(), "Seq2Seq::decode", "tgt_in ",
            tgt_in.shape(), " and tgt_valid ", tgt_valid.shape(), " must both be (B, T)");
  ag::ModuleScope scope("decoder");
  const int64_t t = tgt_in.size(1);
  const Var y = tgt_pos->forward(hook_point(tgt_embed->forward(tgt_in), "decoder.embed"));
  const Tensor self_mask = combine_masks(causal_mask(t), key_padding_mask(tgt_valid));
  return decoder->forward(y, memory, self_mask, key_padding_mask(src_valid));
}

Var Seq2Seq::forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                     const Tensor& tgt_valid) const {
  const Var h = features(src, tgt_in, src_valid, tgt_valid);
  ag::ModuleScope scope("decoder");
  return project(h);
}

Var Seq2Seq::features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                      const Tensor& tgt_valid) const {
  QKV_CHECK(src.size(0) == tgt_in.size(0), "Seq2Seq", "batch sizes differ: src ", src.shape(),
            ", tgt_in ", tgt_in.shape());
  const Var memory = encode(src, src_valid);
  return decode_features(memory, src_valid, tgt_in, tgt_valid);
}

std::vector<std::string> Seq2Seq::hook_points() const {
  std::vector<std::string> out{"encoder.embed"};
  if (sequence_encoder)
    sequence_encoder->list_hooks(out);
  else
    encoder->list_hooks(out);
  out.push_back("decoder.embed");
  decoder->list_hooks(out);
  out.push_back("logits");
  return out;
}

std::vector<AttentionSite> Seq2Seq::attention_sites() const { return seq2seq_sites(config); }

std::vector<AttentionSite> seq2seq_sites(const ModelConfig& c) {
  // a recurrent or convolutional encoder has no attention (Seq2Seq's empty Encoder)
  const int64_t enc = c.encoder == EncoderKind::attention ? c.encoder_layers : 0,
                dec = c.decoder_layers, h = c.heads;
  std::vector<AttentionSite> out;
  if (enc > 0)
    out.push_back({"encoder", "encoder self-attention", "encoder.blocks.", "attn", Side::input,
                   Side::input, false, enc, h, "query (source)", "key (source)", "encoder_self"});
  out.push_back({"decoder", "decoder self-attention", "decoder.blocks.", "attn", Side::output,
                 Side::output, true, dec, h, "output token", "key (decoder input)",
                 "decoder_self"});
  out.push_back({"cross", "cross-attention", "decoder.blocks.", "cross", Side::output, Side::input,
                 false, dec, h, "output token", "key (source)", "cross"});
  return out;
}

const MultiHeadAttention& Seq2Seq::attention_of(const AttentionSite& site, int64_t layer) const {
  const auto l = static_cast<size_t>(layer);
  if (site.name == "encoder" && l < encoder->layers.size()) return *encoder->layers[l]->self_attn;
  if (site.name == "decoder" && l < decoder->layers.size()) return *decoder->layers[l]->self_attn;
  if (site.name == "cross" && l < decoder->layers.size()) return *decoder->layers[l]->cross_attn;
  throw Error(cat("Seq2Seq: no attention '", site.name, "' at layer ", layer,
                  " (encoder, decoder or cross)"));
}

Model::Stream Seq2Seq::output_stream() const {
  return {"decoder.blocks.", static_cast<int64_t>(decoder->layers.size()), decoder->norm.get()};
}

Model::OutputLayer Seq2Seq::output_layer() const {
  if (output) return {output->weight, output->bias, config.logit_softcap};
  return {tgt_embed->weight, Var(), config.logit_softcap};  // tied: logits = h E^T
}

DecodeState Seq2Seq::start_decoding(const Var& memory, const Tensor& src_valid) const {
  auto s = std::make_unique<Cache>();
  s->memory = memory;
  s->cross_mask = key_padding_mask(src_valid);
  return DecodeState(std::move(s));
}

void Seq2Seq::Cache::reorder(const Tensor& rows) {
  for (DecoderBlockCache& c : cache) {
    c.self_k = Var(index_select(c.self_k.data(), 0, rows));
    c.self_v = Var(index_select(c.self_v.data(), 0, rows));
  }
}

Var Seq2Seq::decode_step(DecodeState& state, const Tensor& tokens) const {
  Cache& s = state.as<Cache>();
  QKV_CHECK(tokens.dim() == 1 && tokens.size(0) == s.memory.size(0), "Seq2Seq::decode_step",
            "tokens ", tokens.shape(), " for a batch of ", s.memory.size(0));
  ag::NoGrad no_grad;
  const Var y = tgt_pos->forward(
      hook_point(tgt_embed->forward(tokens.unsqueeze(1)), "decoder.embed"), s.position);
  const Var h = decoder->forward_step(y, s.memory, s.cross_mask, s.cache);
  ++s.position;
  return ag::select(project(h), 1, 0);  // (B, V)
}

// Per block: self-attention's four d x d projections (a decoder block adds cross-attention's
// four) and the feed-forward's matrices; saved for backward per token about 16 d (projections,
// residuals, norms) and the feed-forward's hidden values; per (query, key) pair and head, the
// scores and weights where they are formed.
StackCost transformer_blocks_cost(const ModelConfig& c, int64_t enc, int64_t dec) {
  const double d = static_cast<double>(c.d_model), ff = c.attn_only ? 0.0 : double(c.d_ff);
  const double e = static_cast<double>(enc), k = static_cast<double>(dec);
  const double ffm = c.activation == Activation::swiglu ? 3 : 2;  // swiglu: a third matrix
  StackCost s;
  s.params_d = (e * 4 + k * 8) * d * d;
  s.params_ff = (e + k) * ffm * d * ff;
  s.act_d = (e + k) * 16 * d;
  s.act_ff = (e + k) * (ffm + 1) * ff;
  s.pair_dense = (e + k) * 2 * static_cast<double>(c.heads);
  // Additive scores form tanh(q_i + k_j) per (query, key) pair, d wide over the heads, in every
  // attention layer whatever the kernels: the sum, its tanh and their product with v saved for
  // backward, and one layer's gradients at the peak (tests/run/test_limits.cpp: 156 MB
  // measured at d 64, 4 layers, batch 32 x 32 tokens, estimated 22 MB without this term).
  if (c.attention == AttentionKind::additive)
    s.pair_always = (3 * (e + k * (c.kind == ModelKind::encoder_decoder ? 2 : 1)) + 4) * d;
  s.output_in = d;
  return s;
}

}  // namespace qkv::nn
