// The recurrent encoder-decoders that came before the Transformer ([model] decoder = "gru"),
// at qkv's scale (d = model.d_model):
//
//   encoder  embed (d) -> model.encoder_layers bidirectional GRU (or LSTM) layers, d / 2 units
//            per direction: annotations h_j = [h->_j; h<-_j], memory (B, S, d)
//   cross_attention = true (Bahdanau, Cho, Bengio 2015, "RNNsearch"):
//            s_0 = tanh(W_s h<-_1); each step i (from 1)
//              c_i = sum_j a_ij h_j,  a_ij = softmax_j(v_a . tanh(W_a s_{i-1} + U_a h_j))
//              s_i = GRU([E y_{i-1}; c_i], s_{i-1})
//   cross_attention = false (Cho et al. 2014 / Sutskever et al. 2014, "RNNencdec"):
//            one fixed context c = [h->_S; h<-_1], the encoder's final states; s_0 = tanh(W_s c);
//              s_i = GRU([E y_{i-1}; c], s_{i-1}) (one op over the whole target: no step loop)
//   output   t_i = maxout_2(U_o s_i + V_o E y_{i-1} + C_o c_i) (d -> d / 2),
//            logits = W_o dropout(t_i) (model.dropout)
//
// Simplifications against the papers (1000 units, 620-wide embeddings, 500 maxout units): one
// width d for embeddings, decoder state and alignment model, the annotations d (d / 2 each
// way); the GRU is torch's (the reset gate applied after U s, as nn.GRU, not before); the
// output reads s_i (the paper's eq. 4; its appendix writes s_{i-1}); the alignment model and
// W_s have no biases where the paper has none. The decoder is one layer, as theirs.
//
// Hook points (docs/hooks.md): encoder.embed, encoder.rnn.L.{out,h[,c]}, decoder.embed,
// decoder.context (B, d) (no attention: c), decoder.rnn.0.h0 (B, d), decoder.rnn.0.cross.pattern
// (B, 1, T, S) and .z (B, 1, T, d) (attention: a_i and c_i, site "cross" with one head),
// decoder.rnn.0.out (B, T, d) (s_1..s_T), decoder.readout (B, T, d / 2) (t_i), logits. The
// decoder's points are formed after its recurrence: replacing one changes what follows it in
// the output (a z replaces c_i in t_i) but not the states.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/bahdanau_attention.hpp"
#include "nn/encoder_decoder.hpp"
#include "nn/seq2seq.hpp"

namespace qkv::nn {

class RecurrentSeq2Seq : public EncoderDecoder {
 public:
  // c.decoder must be gru (ModelConfig::validate says which keys go with it).
  RecurrentSeq2Seq(const ModelConfig& c, Generator& gen);

  Var forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
              const Tensor& tgt_valid) const override;
  Var encode(const Tensor& src, const Tensor& src_valid) const override;  // (B, S, d)
  Var decode(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in,
             const Tensor& tgt_valid) const override;
  DecodeState start_decoding(const Var& memory, const Tensor& src_valid) const override;
  Var decode_step(DecodeState& state, const Tensor& tokens) const override;

  std::vector<std::string> hook_points() const override;
  // cross (one layer, one head) with cross_attention; none without.
  std::vector<AttentionSite> attention_sites() const override;
  Embeddings embeddings() const override { return {"encoder.embed", "decoder.embed"}; }
  OutputLayer output_layer() const override;  // W_o: (V, d / 2)
  Stream output_stream() const override;      // no residual stream: "decoder.rnn.", 0 layers

  ModelConfig config;
  std::shared_ptr<Embedding> src_embed, tgt_embed;
  std::shared_ptr<SequenceEncoder> encoder;
  std::shared_ptr<Linear> w_s;                   // s_0 = tanh(W_s ...)
  std::shared_ptr<BahdanauAttention> attention;  // null without cross_attention
  std::shared_ptr<Recurrent> rnn;                // the decoder's GRU: in 2d, hidden d
  std::shared_ptr<Linear> u_o, v_o, c_o;         // the output's t~ = U_o s + V_o E y + C_o c
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> output;  // W_o

  // The decoder's state between steps: the annotations and their keys, s_{i-1}, and the fixed
  // context (no attention).
  struct Cache : DecodeCache {
    Var memory, keys, state, context;
    Tensor mask;  // (B, 1, 1, S)
    void reorder(const Tensor& rows) override;
  };

 protected:
  Var features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
               const Tensor& tgt_valid) const override;
  const MultiHeadAttention& attention_of(const AttentionSite& site, int64_t layer) const override;

 private:
  Cache start(const Var& memory, const Tensor& src_valid) const;
  // One decoder step from y = E y_{i-1} (B, d): c_i (and a_i), then s_i into c.state.
  struct Step {
    Var state, context, weights;  // s_i (B, d), c_i (B, d), a_i (B, S) (attention only)
  };
  Step step(Cache& c, const Var& y) const;
  // The teacher-forced read-out t (B, T, d / 2), before dropout and W_o.
  Var readout(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in) const;
  // t_i from s_i, E y_{i-1} and c_i: (..., d) each -> (..., d / 2)
  Var maxout(const Var& s, const Var& y, const Var& c) const;
  Var project(const Var& t) const;  // dropout, W_o, the soft cap, "logits"
};

}  // namespace qkv::nn
