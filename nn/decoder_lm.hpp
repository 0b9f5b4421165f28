// DecoderLM: a decoder-only Transformer language model, GPT's layout ([model] kind = "decoder").
//
//   ids (B, T) int64 -> token embedding + positions -> N blocks -> final norm
//                    -> logits (B, T, V) = h E^T (the head tied to the embedding E), or
//                       h W^T with an output matrix W (V, d) of its own (tie_output = false),
//                       soft-capped when logit_softcap > 0
//
// A block is a TransformerEncoderBlock under a causal mask: self-attention over the past and
// the position itself, then the FFN (pre-LN by default). That is exactly
// torch.nn.TransformerEncoderLayer with a causal src_mask (tests/nn/test_torch_parity.cpp).
// With model.attn_only a block is the self-attention sublayer alone (no FFN): the residual
// stream is the embeddings plus the heads' outputs, as the models of Elhage et al. 2021.
// Positions: any kind qkv has (ModelConfig::position); learned, as GPT, by default.
//
// Initialisation (GPT-2): every Linear weight, the embedding and the learned position table
// ~ N(0, 0.02); the residual branches' output projections (attention w_o, FFN linear2)
// ~ N(0, 0.02 / sqrt(residual branches): 2 * layers, or layers when attention-only); biases
// 0, norm gains 1; an untied output matrix
// ~ N(0, 0.02), no bias (nanoGPT's lm_head).
//
// Incremental decoding: step() feeds new tokens with every layer's keys and values cached,
// so a token costs one position's work instead of a pass over the whole prefix.
#pragma once
#include <limits>
#include <vector>

#include "nn/model.hpp"
#include "nn/positional.hpp"
#include "nn/transformer.hpp"

namespace qkv::nn {

struct ModelConfig;

class DecoderLM : public Model {
 public:
  // c.tgt_vocab tokens, c.decoder_layers blocks of c.block(); dropout masks from dropout_gen.
  DecoderLM(const ModelConfig& c, Generator& gen, std::shared_ptr<Generator> dropout_gen);
  // A run's language model: c (kind = "decoder") validated, the dropout generator seeded from
  // gen before any weight is drawn.
  DecoderLM(const ModelConfig& c, Generator& gen);

  // ids: (B, T) int64 -> logits (B, T, V). valid, when defined: (B, T) bool, true on real
  // tokens (padding is masked as keys).
  Var forward(const Tensor& ids, const Tensor& valid = Tensor()) const;
  // nn::Model's forward: tgt_in alone (src and src_valid are ignored).
  Var forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
              const Tensor& tgt_valid) const override;
  // embed, the blocks' (and final_norm), logits.
  std::vector<std::string> hook_points() const override;
  // Its one site, "self": causal self-attention over the text (nn/attention_site.hpp).
  std::vector<AttentionSite> attention_sites() const override;
  Embeddings embeddings() const override { return {"", "embed"}; }
  OutputLayer output_layer() const override;  // output, or the embedding when tied
  Stream output_stream() const override;      // its blocks and final norm

  // The keys and values of every layer for the tokens fed so far.
  struct Cache {
    std::vector<SelfAttentionCache> layers;
    int64_t length = 0;  // positions cached
  };
  // tokens: (B, n) int64, the next n tokens of each sequence (n > 1 fills the cache with a
  // prompt in one pass) -> logits (B, n, V). No autograd; call in eval mode.
  Var step(Cache& cache, const Tensor& tokens) const;

  // Longest sequence the positions allow: max_len for learned positions, else unbounded.
  int64_t max_positions() const {
    return pos->kind == PositionKind::learned ? pos->n_max : std::numeric_limits<int64_t>::max();
  }
  int64_t vocab() const { return embed->vocab(); }

  std::shared_ptr<Embedding> embed;
  std::shared_ptr<PositionalEncoding> pos;
  std::shared_ptr<Encoder> blocks;  // with the final norm when pre-LN (or final_norm)
  std::shared_ptr<Linear> output;   // null when tied to embed
  double logit_softcap = 0;

 protected:
  Var features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
               const Tensor& tgt_valid) const override;
  const MultiHeadAttention& attention_of(const AttentionSite& site, int64_t layer) const override;

 private:
  Var head(const Var& h) const;  // (..., d) -> logits (..., V)
  // forward up to the head: (B, T, d)
  Var body(const Tensor& ids, const Tensor& valid) const;
};

}  // namespace qkv::nn
