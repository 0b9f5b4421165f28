// nn::EncoderDecoder: what greedy decoding, beam search, evaluation and the pairs family need of
// a model that reads a source and writes a target, whichever model it is -- the Transformer
// (nn::Seq2Seq, model.decoder = "attention") or the recurrent encoder-decoders of Cho et al. /
// Sutskever et al. and Bahdanau et al. (nn::RecurrentSeq2Seq, model.decoder = "gru").
//
//   memory (B, S, d_mem) = encode(src (B, S), src_valid (B, S))
//   logits (B, T, V)     = decode(memory, src_valid, tgt_in (B, T), tgt_valid (B, T))
//   state = start_decoding(memory, src_valid); logits (B, V) = decode_step(state, tokens (B))
//
// decode_step gives, token by token, the logits decode gives for the whole prefix. The state is
// the model's own (a key/value cache, a recurrent state); a consumer only reorders its rows
// (beam search) and never looks inside. Masks are bool, true on real tokens.
#pragma once
#include <memory>

#include "nn/model.hpp"

namespace qkv::nn {

struct ModelConfig;

// What a model keeps between decode steps: its own type, behind this interface.
struct DecodeCache {
  virtual ~DecodeCache() = default;
  // Row r continues row rows[r]'s state: rows (R) int64 over the current rows.
  virtual void reorder(const Tensor& rows) = 0;
};

// One incremental decode of a batch: owns the model's cache.
class DecodeState {
 public:
  explicit DecodeState(std::unique_ptr<DecodeCache> cache) : cache_(std::move(cache)) {}
  void reorder(const Tensor& rows) { cache_->reorder(rows); }
  // The model's own cache type (the model that made the state asks; qkv::Error otherwise).
  template <class C>
  C& as() const {
    C* c = dynamic_cast<C*>(cache_.get());
    QKV_CHECK(c != nullptr, "DecodeState", "the state was started by another kind of model");
    return *c;
  }

 private:
  std::unique_ptr<DecodeCache> cache_;
};

class EncoderDecoder : public Model {
 public:
  // The encoder's outputs, memory (B, S, d_mem): everything decoding reads of the source, so
  // rows of it can be repeated (beam search) before start_decoding.
  virtual Var encode(const Tensor& src, const Tensor& src_valid) const = 0;
  // Teacher-forced decoder pass over tgt_in: (B, T, V) logits.
  virtual Var decode(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in,
                     const Tensor& tgt_valid) const = 0;
  virtual DecodeState start_decoding(const Var& memory, const Tensor& src_valid) const = 0;
  // tokens: (B) int64, the previous output (or <bos>) -> logits (B, V) for the next token.
  // Without recording.
  virtual Var decode_step(DecodeState& state, const Tensor& tokens) const = 0;

 protected:
  using Model::Model;
};

// The model config c describes: model.decoder = "attention" -> nn::Seq2Seq, "gru" ->
// nn::RecurrentSeq2Seq (c.kind must be encoder_decoder). The one place that asks.
std::unique_ptr<EncoderDecoder> make_encoder_decoder(const ModelConfig& c, Generator& gen);

}  // namespace qkv::nn
