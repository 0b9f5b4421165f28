#include "nn/decoder_lm.hpp"

#include <cmath>

#include "nn/hooks.hpp"
#include "nn/model_sites.hpp"

#include "nn/seq2seq.hpp"

namespace qkv::nn {

namespace {

void normal_init(Var& w, double std, Generator& gen) {
  w.data().copy_(mul(randn(w.shape(), gen, w.dtype()), std));
}

const ModelConfig& validated_lm(const ModelConfig& c) {
  c.validate();
  QKV_CHECK(c.kind == ModelKind::decoder, "DecoderLM",
            "model.kind = \"encoder_decoder\" is nn::Seq2Seq, not a language model");
  return c;
}

}  // namespace

// Its tensors are saved under "lm.": the name the language model had in every run folder.
DecoderLM::DecoderLM(const ModelConfig& c, Generator& gen, std::shared_ptr<Generator> dgen)
    : Model(std::move(dgen), "lm"), logit_softcap(c.logit_softcap) {
  QKV_CHECK(c.tgt_vocab > 0 && c.decoder_layers > 0, "DecoderLM", "needs a vocabulary (got ",
            c.tgt_vocab, ") and at least one layer (got ", c.decoder_layers, ")");
  embed = register_module(
      "embed", std::make_shared<Embedding>(c.tgt_vocab, c.d_model, gen, c.scale_embedding));
  pos = register_module("pos", std::make_shared<PositionalEncoding>(
                                   c.position, c.d_model, c.max_len, gen, c.dropout, dropout_gen_));
  blocks = register_module(
      "blocks", std::make_shared<Encoder>(c.decoder_layers, c.block(), c.final_norm || c.norm_first,
                                          gen, dropout_gen_));
  // GPT-2's initialisation, drawn after construction (which drew the default one).
  // One residual branch per block when attention-only, two (attention, FFN) otherwise.
  const double branches = static_cast<double>(c.decoder_layers) * (c.attn_only ? 1 : 2);
  const double std = 0.02, residual = std / std::sqrt(branches);
  normal_init(embed->weight, std, gen);
  if (pos->table.defined()) normal_init(pos->table, std, gen);
  for (const auto& layer : blocks->layers) {
    const MultiHeadAttention& a = *layer->self_attn;
    for (const auto& lin : {a.w_q, a.w_k, a.w_v}) normal_init(lin->weight, std, gen);
    normal_init(a.w_o->weight, residual, gen);
    if (!layer->ffn) continue;  // attn_only
    normal_init(layer->ffn->linear1->weight, std, gen);
    normal_init(layer->ffn->linear2->weight, residual, gen);
    if (layer->ffn->linear3) normal_init(layer->ffn->linear3->weight, std, gen);
  }
  if (!c.tie_output) {  // drawn last: a tied model's parameters stay as they were
    output =
        register_module("output", std::make_shared<Linear>(c.d_model, c.tgt_vocab, gen, false));
    normal_init(output->weight, std, gen);
  }
}

Var DecoderLM::head(const Var& h) const {
  const Var logits = output ? output->forward(h) : ag::linear(h, embed->weight);  // tied: h E^T
  return hook_point(soft_cap(logits, logit_softcap), "logits");
}

DecoderLM::DecoderLM(const ModelConfig& c, Generator& gen)
    : DecoderLM(validated_lm(c), gen, std::make_shared<Generator>(gen.next_u64())) {}

Var DecoderLM::forward(const Tensor&, const Tensor& tgt_in, const Tensor&,
                       const Tensor& tgt_valid) const {
  return forward(tgt_in, tgt_valid);
}

Var DecoderLM::features(const Tensor&, const Tensor& tgt_in, const Tensor&,
                        const Tensor& tgt_valid) const {
  return body(tgt_in, tgt_valid);
}

std::vector<std::string> DecoderLM::hook_points() const {
  std::vector<std::string> out{"embed"};
  blocks->list_hooks(out);
  out.push_back("logits");
  return out;
}

std::vector<AttentionSite> decoder_lm_sites(const ModelConfig& c) {
  return {{"self", "causal self-attention", "blocks.", "attn", Side::output, Side::output, true,
           c.decoder_layers, c.heads, "query (token)", "key (the text so far)", "causal"}};
}

std::vector<AttentionSite> DecoderLM::attention_sites() const {
  ModelConfig c;  // the sizes the sites read, as built
  c.decoder_layers = static_cast<int64_t>(blocks->layers.size());
  c.heads = blocks->layers[0]->self_attn->heads;
  return decoder_lm_sites(c);
}

const MultiHeadAttention& DecoderLM::attention_of(const AttentionSite& site, int64_t layer) const {
  QKV_CHECK(
      site.name == "self" && layer >= 0 && layer < static_cast<int64_t>(blocks->layers.size()),
      "DecoderLM", "no attention '", site.name, "' at layer ", layer, " (self, layers 0..",
      blocks->layers.size() - 1, ")");
  return *blocks->layers[static_cast<size_t>(layer)]->self_attn;
}

Model::Stream DecoderLM::output_stream() const {
  return {"blocks.", static_cast<int64_t>(blocks->layers.size()), blocks->norm.get()};
}

Model::OutputLayer DecoderLM::output_layer() const {
  if (output) return {output->weight, output->bias, logit_softcap};
  return {embed->weight, Var(), logit_softcap};  // tied: h E^T
}

Var DecoderLM::forward(const Tensor& ids, const Tensor& valid) const {
  return head(body(ids, valid));
}

Var DecoderLM::body(const Tensor& ids, const Tensor& valid) const {
  QKV_CHECK(ids.dim() == 2 && ids.dtype() == DType::i64, "DecoderLM",
            "ids must be (B, T) int64, got ", dtype_name(ids.dtype()), " ", ids.shape());
  QKV_CHECK(!valid.defined() || valid.shape() == ids.shape(), "DecoderLM", "valid ", valid.shape(),
            " must match ids ", ids.shape());
  const int64_t t = ids.size(1);
  QKV_CHECK(t <= max_positions(), "DecoderLM", "a sequence of ", t,
            " tokens is longer than the learned positions' max_len ", max_positions());
  const Var x = pos->forward(hook_point(embed->forward(ids), "embed"));
  Tensor mask = causal_mask(t);
  if (valid.defined()) mask = combine_masks(mask, key_padding_mask(valid));
  return blocks->forward(x, mask);
}

Var DecoderLM::step(Cache& cache, const Tensor& tokens) const {
  QKV_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::i64 && tokens.size(1) > 0,
            "DecoderLM::step", "tokens must be (B, n) int64 with n >= 1, got ",
            dtype_name(tokens.dtype()), " ", tokens.shape());
  QKV_CHECK(cache.length + tokens.size(1) <= max_positions(), "DecoderLM::step", "position ",
            cache.length + tokens.size(1), " is beyond the learned positions' max_len ",
            max_positions());
  ag::NoGrad no_grad;
  const Var x = pos->forward(hook_point(embed->forward(tokens), "embed"), cache.length);
  const Var h = blocks->forward_step(x, cache.layers);
  cache.length += tokens.size(1);
  return head(h);
}

}  // namespace qkv::nn
