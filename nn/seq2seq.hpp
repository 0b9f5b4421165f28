// Seq2Seq: the encoder-decoder Transformer of the lesson (ModelConfig::kind = "encoder_decoder").
// The decoder-only language model (kind = "decoder") is nn::DecoderLM; both are nn::Model.
// ModelConfig, the [model] section, describes either.
//
//   src (B, S) int64 -> embed * sqrt(d) + PE -> Encoder -> memory (B, S, d)
//   tgt_in (B, T) int64 -> embed * sqrt(d) + PE -> Decoder(memory) -> Linear -> logits (B, T, V)
//
// Masks: src_valid (B, S) and tgt_valid (B, T) are bool, true on real tokens (not padding).
// The encoder masks padded keys; the decoder's self-attention is causal AND masks padded
// targets; its cross-attention masks padded sources.
#pragma once
#include <string>

#include "nn/encoder_decoder.hpp"
#include "nn/model.hpp"
#include "nn/pooling.hpp"
#include "nn/positional.hpp"
#include "nn/sequence_encoder.hpp"
#include "nn/transformer.hpp"

namespace qkv::nn {

struct ModelConfig {
  // encoder_decoder (Seq2Seq) | decoder (DecoderLM: decoder_layers causal self-attention
  // blocks; encoder_layers and share_embeddings do not apply)
  ModelKind kind = ModelKind::encoder_decoder;
  int64_t src_vocab = 0;  // set from the data's vocabulary
  int64_t tgt_vocab = 0;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t d_ff = 512;  // unused (and unchecked) when attn_only
  // Blocks of attention alone, no FFN (TransformerLens's attn_only): the residual stream is the
  // embeddings plus the attention layers' outputs.
  bool attn_only = false;
  int64_t encoder_layers = 2;
  // encoder_decoder only: attention (encoder_layers Transformer blocks) | gru | lstm | conv
  // (encoder_layers layers of that kind instead: nn/sequence_encoder.hpp); the decoder stays
  // the Transformer's and reads the encoder's outputs through cross-attention.
  EncoderKind encoder = EncoderKind::attention;
  // encoder_decoder only: attention (decoder_layers Transformer blocks: Seq2Seq) | gru (one GRU
  // layer, encoder = "gru" or "lstm", decoder_layers = 1, position = "none":
  // nn::RecurrentSeq2Seq, nn/rnn_seq2seq.hpp)
  DecoderKind decoder = DecoderKind::attention;
  // gru decoder: true reads the source through Bahdanau's additive attention (attention =
  // "additive"), false through one fixed context, the encoder's final states (Cho et al.).
  // A Transformer decoder always attends (true).
  bool cross_attention = true;
  int64_t decoder_layers = 2;
  double dropout = 0.1;
  double attention_dropout = 0.0;
  bool norm_first = false;              // false: post-LN (the lesson's); true: pre-LN
  bool final_norm = false;              // a norm after each stack (always on for pre-LN)
  NormKind norm = NormKind::layernorm;  // layernorm | rmsnorm: every norm of the model
  bool qk_norm = false;  // RMSNorm over each head's queries and keys (every attention layer)
  Activation activation = Activation::relu;  // relu | gelu | relu2 | swiglu
  // sinusoidal | learned (added to the embeddings) | relative | rope (inside self-attention,
  // encoder and decoder; cross-attention is content-only) | none
  PositionKind position = PositionKind::sinusoidal;
  int64_t max_len = 512;           // learned positions only
  int64_t relative_clip = 16;      // relative positions only: offsets clipped to +-K
  bool scale_embedding = true;     // embeddings * sqrt(d_model)
  bool share_embeddings = false;   // one table for source and target (same vocab)
  bool tie_output = false;         // output projection = target embedding^T (decoder: the
                                   // default; false gives it an output matrix of its own)
  double logit_softcap = 0.0;      // > 0: logits = C * tanh(logits / C); 0: off
  AttentionScale attention_scale;  // on q . k: 1/sqrt(d_k) (default) or a number (1 = none)
  double layer_norm_eps = 1e-5;    // LayerNorm's or RMSNorm's eps (and qk_norm's)
  bool bias = true;
  AttentionKind attention = AttentionKind::dot;  // dot | additive | linear: every layer's scorer
  int64_t window = 0;  // > 0: sliding-window self-attention (dot only); 0 = full
  // encoder: what the classifier reads, <cls>'s hidden state or the mean (nn/pooling.hpp)
  Pooling pool = Pooling::cls;
  // Throws qkv::Error naming the key when a value is out of range or inconsistent.
  void validate() const;
  // The rules of decoder = "gru" (rnn_seq2seq.cpp), asked by validate.
  void validate_recurrent_decoder() const;
  // The defaults of kind = "decoder", as GPT: learned positions, pre-LN with a final
  // LayerNorm, GELU, no embedding scaling, the head tied to the embedding.
  static ModelConfig decoder_defaults();
  BlockConfig block() const;
};

class Seq2Seq : public EncoderDecoder {
 public:
  // c.kind must be encoder_decoder. The dropout generator is seeded from gen first.
  Seq2Seq(const ModelConfig& c, Generator& gen);

  Var forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
              const Tensor& tgt_valid) const override;
  // memory: (B, S, d)
  Var encode(const Tensor& src, const Tensor& src_valid) const override;
  // Full decoder pass over tgt_in: (B, T, V) logits.
  Var decode(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in,
             const Tensor& tgt_valid) const override;
  // encoder.embed, the encoder's (blocks, or encoder.rnn.* / encoder.conv.*), decoder.embed, the
  // decoder's, logits.
  std::vector<std::string> hook_points() const override;
  // encoder (when encoder_layers > 0), decoder and cross (nn/attention_site.hpp).
  std::vector<AttentionSite> attention_sites() const override;
  Embeddings embeddings() const override { return {"encoder.embed", "decoder.embed"}; }
  OutputLayer output_layer() const override;
  Stream output_stream() const override;  // the decoder's blocks and final norm

  // Incremental decoding: feed one token per sequence at a time; the state (a Cache) caches
  // every layer's keys and values, so step t costs O(t) instead of re-running the prefix.
  struct Cache : DecodeCache {
    Var memory;
    Tensor cross_mask;  // (B, 1, 1, S)
    std::vector<DecoderBlockCache> cache;
    int64_t position = 0;
    void reorder(const Tensor& rows) override;  // the self-attention keys and values
  };
  DecodeState start_decoding(const Var& memory, const Tensor& src_valid) const override;
  // tokens: (B) int64, the previous output (or <bos>) -> logits (B, V) for the next token.
  Var decode_step(DecodeState& state, const Tensor& tokens) const override;

  ModelConfig config;
  std::shared_ptr<Embedding> src_embed, tgt_embed;
  std::shared_ptr<PositionalEncoding> src_pos, tgt_pos;
  // The Transformer encoder: encoder_layers blocks, or none (and unregistered) when
  // config.encoder is not attention; then sequence_encoder, registered as "encoder", encodes.
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<SequenceEncoder> sequence_encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<Linear> output;  // null when tied to tgt_embed

 protected:
  Var features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
               const Tensor& tgt_valid) const override;
  const MultiHeadAttention& attention_of(const AttentionSite& site, int64_t layer) const override;

 private:
  Var project(const Var& h) const;  // (..., d) -> (..., V)
  // decode up to the output layer: (B, T, d)
  Var decode_features(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in,
                      const Tensor& tgt_valid) const;
};

}  // namespace qkv::nn
