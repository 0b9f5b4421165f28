// Transformer blocks and stacks.
//
// Post-LN (the lesson's, norm_first = false): x = LayerNorm(x + Sublayer(x)).
// Pre-LN (norm_first = true):                 x = x + Sublayer(LayerNorm(x)).
// Dropout is applied to each sublayer's output before the residual add, as in PyTorch.
// Masks follow nn/attention.hpp: bool, true = may attend.
#pragma once
#include <string>
#include <vector>

#include "nn/attention.hpp"

namespace qkv::nn {

struct BlockConfig {
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t d_ff = 512;
  bool attn_only = false;  // no FFN sublayer (nor its norm and dropout): attention alone
  double dropout = 0.1;
  double attention_dropout = 0.0;
  bool norm_first = false;
  double layer_norm_eps = 1e-5;  // LayerNorm's or RMSNorm's eps (and qk_norm's)
  NormKind norm = NormKind::layernorm;
  bool qk_norm = false;  // RMSNorm (no gain) over each head's queries and keys, every layer
  Activation activation = Activation::relu;
  AttentionScale scale;  // on q . k, every attention layer (default 1/sqrt(d_k))
  bool bias = true;
  AttentionKind attention = AttentionKind::dot;  // every attention layer (self and cross)
  int64_t window = 0;  // self-attention only: sliding window (dot); 0 = full
  // Positions inside self-attention (relative | rope; other kinds add nothing here), and the
  // relative bias's clip K. Cross-attention is content-only whatever this says.
  PositionKind position = PositionKind::none;
  int64_t relative_clip = 16;
};

// Cached keys and values of one self-attention layer, for incremental decoding.
struct SelfAttentionCache {
  Var k, v;  // (B, h, t, d_head): projections of every position fed so far (undefined: none)
  int64_t length() const { return k.defined() ? k.size(2) : 0; }
};

// Self-attention of n new positions t .. t + n - 1 over every cached position and themselves
// (t = the cached length): appends their keys and values to k_cache and v_cache (B, h, t, d_head;
// undefined when empty), then attends under causal_mask(n, t + n) (no mask for n = 1: nothing
// cached lies in the future). h: (B, n, d). The encoder-decoder's decoder and the decoder-only
// LM both decode through it.
Var cached_self_attention(const MultiHeadAttention& attn, const Var& h, Var& k_cache, Var& v_cache);

// Self-attention + FFN. x: (B, n, d) -> (B, n, d). Under a causal mask it is a decoder-only
// (GPT) block. BlockConfig::attn_only: self-attention alone (ffn, norm2 and dropout2 null).
class TransformerEncoderBlock : public Module {
 public:
  TransformerEncoderBlock(const BlockConfig& c, Generator& gen, std::shared_ptr<Generator> dgen);
  // mask: broadcastable to (B, h, n, n), e.g. key_padding_mask(src_valid).
  Var forward(const Var& x, const Tensor& mask) const;
  // Causal incremental form: x (B, n, d) holds the next n positions; the cache holds the
  // earlier ones and receives these. No autograd (inference), no dropout.
  Var forward_step(const Var& x, SelfAttentionCache& cache) const;
  // Pre-LN with no hooks in scope, as forward computes it, for a stack: h = norm1(x) already
  // computed (fused with the previous block's last add), and the block's last add fused with
  // next (the next block's norm1 or the stack's final norm; null: none), whose output goes to
  // *next_h. Returns the block's output, the stream.
  Var forward_pre_ln(const Var& x, const Var& h, const Tensor& mask, const Norm* next,
                     Var* next_h) const;

  // Names its hook points prefix + resid_pre, attn_out, resid_mid, mlp_out, resid_post and its
  // attention's and FFN's (prefix + "attn.", prefix + "mlp."); nn/hooks.hpp. Attention alone
  // passes resid_pre, attn.*, attn_out, resid_post.
  void name_hooks(const std::string& prefix);
  // Appends the names of its hook points in the order forward passes them.
  void list_hooks(std::vector<std::string>& out) const;

  bool norm_first;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<PositionwiseFeedForward> ffn;
  std::shared_ptr<Norm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;
  std::string hook_prefix;

 private:
  template <class SA, class FF>
  Var sublayers(const Var& x, const SA& sa, const FF& ff) const;
  template <class SA, class FF>
  Var pre_ln(const Var& x, const Var& h, const SA& sa, const FF& ff, const Norm* next,
             Var* next_h) const;
  Var attention_sublayer(const Var& h, const Tensor& mask) const;  // dropout1(attention(h))
  Var ffn_sublayer(const Var& h) const;                            // dropout2(ffn(h))
};

// Cached keys and values of one decoder block, for incremental decoding.
struct DecoderBlockCache {
  Var self_k, self_v;    // (B, h, t, d_head): projections of every position decoded so far
  Var cross_k, cross_v;  // (B, h, m, d_head): the memory's projections, computed once
};

// Masked self-attention + cross-attention to the encoder output + FFN. BlockConfig::attn_only:
// the two attentions alone (ffn, norm3 and dropout3 null; no resid_cross, no mlp_* points).
class TransformerDecoderBlock : public Module {
 public:
  TransformerDecoderBlock(const BlockConfig& c, Generator& gen, std::shared_ptr<Generator> dgen);
  // x: (B, n, d), memory: (B, m, d). self_mask broadcastable to (B, h, n, n) (causal AND
  // target padding); cross_mask to (B, h, n, m) (source padding).
  Var forward(const Var& x, const Var& memory, const Tensor& self_mask,
              const Tensor& cross_mask) const;
  // One new position. x: (B, 1, d); the cache holds positions < t and receives t (rope keys
  // are cached rotated, each at its own position; the query is rotated at t).
  // cross_mask broadcastable to (B, h, 1, m). No autograd (inference).
  Var forward_step(const Var& x, const Var& memory, const Tensor& cross_mask,
                   DecoderBlockCache& cache) const;
  // As the encoder block's forward_pre_ln.
  Var forward_pre_ln(const Var& x, const Var& h, const Var& memory, const Tensor& self_mask,
                     const Tensor& cross_mask, const Norm* next, Var* next_h) const;

  // As the encoder block's, plus cross_out, resid_cross and the cross-attention's (prefix +
  // "cross.").
  void name_hooks(const std::string& prefix);
  void list_hooks(std::vector<std::string>& out) const;

  bool norm_first;
  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<PositionwiseFeedForward> ffn;
  std::shared_ptr<Norm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;
  std::string hook_prefix;

 private:
  template <class SA, class CA, class FF>
  Var sublayers(const Var& x, const SA& sa, const CA& ca, const FF& ff) const;
  template <class SA, class CA, class FF>
  Var pre_ln(const Var& x, const Var& h, const SA& sa, const CA& ca, const FF& ff, const Norm* next,
             Var* next_h) const;
  Var self_sublayer(const Var& h, const Tensor& mask) const;  // dropout1(self-attention(h))
  Var cross_sublayer(const Var& h, const Var& memory, const Tensor& mask) const;
  Var ffn_sublayer(const Var& h) const;  // dropout3(ffn(h))
};

// N encoder blocks, with a final norm (BlockConfig::norm) when final_norm (pre-LN stacks need one;
// PyTorch's nn.Transformer adds one to post-LN stacks too).
class Encoder : public Module {
 public:
  Encoder(int64_t layers, const BlockConfig& c, bool final_norm, Generator& gen,
          std::shared_ptr<Generator> dgen);
  Var forward(const Var& x, const Tensor& mask) const;
  // Causal incremental form (decoder-only LMs): see TransformerEncoderBlock::forward_step.
  Var forward_step(const Var& x, std::vector<SelfAttentionCache>& cache) const;
  // Names the hook points prefix + "blocks.L." and prefix + "final_norm" (nn/hooks.hpp); an
  // Encoder starts with prefix "" (a decoder-only LM's names), Seq2Seq sets "encoder.".
  void name_hooks(const std::string& prefix);
  // Appends the names of its hook points in the order forward passes them.
  void list_hooks(std::vector<std::string>& out) const;
  std::vector<std::shared_ptr<TransformerEncoderBlock>> layers;
  std::shared_ptr<Norm> norm;  // null without final_norm
  std::string hook_prefix;
};

class Decoder : public Module {
 public:
  Decoder(int64_t layers, const BlockConfig& c, bool final_norm, Generator& gen,
          std::shared_ptr<Generator> dgen);
  Var forward(const Var& x, const Var& memory, const Tensor& self_mask,
              const Tensor& cross_mask) const;
  Var forward_step(const Var& x, const Var& memory, const Tensor& cross_mask,
                   std::vector<DecoderBlockCache>& cache) const;
  // As Encoder::name_hooks; a Decoder starts with prefix "decoder.".
  void name_hooks(const std::string& prefix);
  void list_hooks(std::vector<std::string>& out) const;
  std::vector<std::shared_ptr<TransformerDecoderBlock>> layers;
  std::shared_ptr<Norm> norm;
  std::string hook_prefix;
};

}  // namespace qkv::nn
