// The encoder of an encoder-decoder whose [model] encoder is not attention: the lesson's
// recurrent and convolutional layers in the place of the Transformer's encoder blocks, so the
// three can be trained and compared under one decoder (the Transformer's, reading the
// encoder's outputs through cross-attention).
//
//   gru, lstm  `layers` bidirectional layers of d / 2 units per direction: out (B, S, d), the
//              two directions side by side (Bahdanau et al.'s encoder); parameters under
//              "rnn." with torch.nn.GRU / LSTM's names (nn/recurrent.hpp)
//   conv       a ConvStack of `layers` layers, kernel 3, dilations 1, 2, 4, ... (non-causal),
//              residual + the model's norm after each (nn/conv.hpp); parameters under "conv."
//
// x: the embedded source (B, S, d) (positions added as the model's position kind says), valid:
// (B, S) bool, true on real tokens. Padded positions change nothing real; their outputs are 0.
//
// Hook points, under the Seq2Seq's "encoder." prefix (docs/hooks.md): encoder.rnn.L.out
// (B, S, d), encoder.rnn.L.h (2, B, d/2), encoder.rnn.L.c (2, B, d/2, lstm only);
// encoder.conv.L.conv and encoder.conv.L.out (B, S, d).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/conv.hpp"
#include "nn/kinds.hpp"
#include "nn/recurrent.hpp"

namespace qkv::nn {

struct SequenceEncoderOptions {
  EncoderKind kind = EncoderKind::gru;  // gru, lstm or conv
  int64_t d = 0;                        // the model's width (even for gru and lstm)
  int64_t layers = 1;
  NormKind norm = NormKind::layernorm;       // conv: the norm after each layer
  Activation activation = Activation::relu;  // conv: relu, gelu or relu2 (swiglu: relu)
};

class SequenceEncoder : public Module {
 public:
  SequenceEncoder(const SequenceEncoderOptions& o, Generator& gen);
  // x: (B, S, d), valid: (B, S) -> (B, S, d)
  Var forward(const Var& x, const Tensor& valid) const;
  // Names its hook points prefix + "rnn." or prefix + "conv." (Seq2Seq: "encoder.").
  void name_hooks(const std::string& prefix);
  void list_hooks(std::vector<std::string>& out) const;
  std::shared_ptr<Recurrent> rnn;   // gru, lstm
  std::shared_ptr<ConvStack> conv;  // conv
  SequenceEncoderOptions options;
};

}  // namespace qkv::nn
