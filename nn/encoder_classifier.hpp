// EncoderClassifier: an encoder-only Transformer that reads one class out of a sequence, BERT's
// shape (the encoder-only family: model.kind = "encoder", run/family_encoder.cpp).
//
//   src (B, S) int64 -> embed (* sqrt(d) when scale_embedding) + positions      x: (B, S, d)
//     -> encoder_layers blocks under src_valid's key padding mask, then the final norm
//        (pre-LN, or final_norm)                                               h: (B, S, d)
//     -> pool: h[:, 0] (cls) or the mean of h over real positions (mean)  pooled: (B, 1, d)
//     -> classifier Linear (d -> C), soft-capped when logit_softcap > 0   logits: (B, 1, C)
//
// A block is the lesson's encoder block (TransformerEncoderBlock: self-attention over every
// real position, then the FFN; post-LN or pre-LN per model.norm_first), exactly
// torch.nn.TransformerEncoderLayer with src_key_padding_mask
// (tests/nn/test_encoder_classifier_reference.cpp).
//
// As an nn::Model it is a one-step output: forward(src, tgt_in, src_valid, tgt_valid) gives
// (B, 1, C) logits whatever tgt_in holds (it must be (B, 1) or undefined; tgt_valid is unused),
// so Model::forward_loss with tgt_out (B, 1) = the class ids is the mean cross-entropy over the
// batch, through Model's fused output layer and loss (features() is the pooled vector).
//
// Config (nn::ModelConfig): src_vocab tokens, tgt_vocab = C classes (>= 2), encoder_layers (>= 1)
// blocks of c.block() (d_model, heads, d_ff, attn_only, dropout, norm, activation, attention,
// window, position: any PositionKind, as Seq2Seq's encoder), scale_embedding, final_norm,
// max_len (learned positions), logit_softcap. decoder_layers does not apply; share_embeddings and
// tie_output are errors (classes are not tokens).
//
// Pooling (nn/pooling.hpp): cls needs position 0 real in every row (the data puts <cls> there);
// mean needs one real position per row. Padding changes no logit: it is masked as keys and left
// out of the mean.
//
// Initialisation: as Seq2Seq's encoder, the modules' own: Xavier-uniform Linear weights
// (attention, FFN and the classifier), zero biases, unit norm gains, the embedding ~ N(0, 1/d)
// when scaled (N(0, 1) otherwise), a learned position table ~ N(0, 0.02).
//
// Parameters (named_parameters; the checkpoint names too, without a scope): embed.weight (V, d),
// pos.weight (max_len, d) when learned, blocks.layers.<i>.* as an Encoder's (self_attn.w_{q,k,v,o},
// ffn.linear{1,2}, norm{1,2}), blocks.norm.* with a final norm, classifier.weight (C, d),
// classifier.bias (C).
//
// Hook points (docs/hooks.md; the names a decoder-only LM's blocks have): embed,
// blocks.<l>.resid_pre ... blocks.<l>.resid_post, final_norm (with a final norm), pooled
// (B, 1, d), logits (B, 1, C). hook_points() lists them in forward order without a forward pass.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "nn/model.hpp"
#include "nn/pooling.hpp"
#include "nn/positional.hpp"
#include "nn/transformer.hpp"

namespace qkv::nn {

struct ModelConfig;

class EncoderClassifier : public Model {
 public:
  // c validated (and the checks above); the dropout generator is seeded from gen before any
  // weight is drawn, as Seq2Seq's.
  EncoderClassifier(const ModelConfig& c, Generator& gen, Pooling pool = Pooling::cls);

  // nn::Model's forward: src (B, S) int64; src_valid (B, S) bool, true on real tokens, or
  // undefined (every position real); tgt_in (B, 1) or undefined, its values unused; tgt_valid
  // unused -> logits (B, 1, C). Each layer's (B, h, S, S) weights: blocks.L.attn.pattern.
  Var forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
              const Tensor& tgt_valid) const override;
  // The class logits of each sequence: src (B, S), src_valid (B, S) or undefined -> (B, C).
  Var classify(const Tensor& src, const Tensor& src_valid = Tensor()) const;

  // Up to the pooling: (B, S, d) hidden states.
  Var encode(const Tensor& src, const Tensor& src_valid) const;
  // h (B, S, d), valid (B, S) bool or undefined -> (B, 1, d): h[:, 0:1] (cls), or
  // sum_s valid[b, s] h[b, s] / sum_s valid[b, s] (mean). Model::read_out's pooling.
  Var pool(const Var& h, const Tensor& valid) const override;

  // Every hook point a forward pass reaches, in that order, from the structure alone.
  std::vector<std::string> hook_points() const override;
  // Its one site, "self": self-attention over every real position (nn/attention_site.hpp).
  std::vector<AttentionSite> attention_sites() const override;
  Embeddings embeddings() const override { return {"embed", ""}; }
  OutputLayer output_layer() const override;  // the classifier
  // Its blocks and final norm: the lens reads the class logits from each layer at the pooled
  // position.
  Stream output_stream() const override;

  // Longest sequence the positions allow: max_len for learned positions, else unbounded.
  int64_t max_positions() const {
    return pos->kind == PositionKind::learned ? pos->n_max : std::numeric_limits<int64_t>::max();
  }
  int64_t vocab() const { return embed->vocab(); }
  int64_t classes() const { return classifier->weight.size(0); }

  Pooling pooling;
  double logit_softcap = 0;
  std::shared_ptr<Embedding> embed;
  std::shared_ptr<PositionalEncoding> pos;
  std::shared_ptr<Encoder> blocks;  // with the final norm when pre-LN (or final_norm)
  std::shared_ptr<Linear> classifier;

 protected:
  // The pooled vector (B, 1, d), after its hook point.
  Var features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
               const Tensor& tgt_valid) const override;
  const MultiHeadAttention& attention_of(const AttentionSite& site, int64_t layer) const override;

 private:
  Var head(const Var& pooled) const;  // (B, 1, d) -> logits (B, 1, C), after its hook point
};

}  // namespace qkv::nn
