#include "nn/sequence_encoder.hpp"

#include "nn/model_cost.hpp"

namespace qkv::nn {

SequenceEncoder::SequenceEncoder(const SequenceEncoderOptions& o, Generator& gen) : options(o) {
  QKV_CHECK(o.kind != EncoderKind::attention, "SequenceEncoder",
            "the attention encoder is nn::Encoder (Transformer blocks)");
  QKV_CHECK(o.d > 0 && o.layers > 0, "SequenceEncoder", "d and layers must be positive, got d ",
            o.d, " layers ", o.layers);
  if (o.kind == EncoderKind::conv) {
    const Activation act = o.activation == Activation::swiglu ? Activation::relu : o.activation;
    conv =
        register_module("conv", std::make_shared<ConvStack>(ConvStackOptions{.d = o.d,
                                                                             .layers = o.layers,
                                                                             .kernel = 3,
                                                                             .dilation_growth = 2,
                                                                             .causal = false,
                                                                             .activation = act,
                                                                             .norm = o.norm},
                                                            gen));
    return;
  }
  QKV_CHECK(o.d % 2 == 0, "SequenceEncoder", "a bidirectional ", name_of(o.kind),
            " encoder splits d_model between its two directions: d_model ", o.d, " must be even");
  const RecurrentCell cell = o.kind == EncoderKind::gru ? RecurrentCell::gru : RecurrentCell::lstm;
  rnn =
      register_module("rnn", std::make_shared<Recurrent>(cell, o.d, o.d / 2, gen, o.layers, true));
}

Var SequenceEncoder::forward(const Var& x, const Tensor& valid) const {
  return rnn ? rnn->forward(x, valid).out : conv->forward(x, valid);
}

void SequenceEncoder::name_hooks(const std::string& prefix) {
  if (rnn) rnn->hook_prefix = prefix + "rnn.";
  if (conv) conv->hook_prefix = prefix + "conv.";
}

void SequenceEncoder::list_hooks(std::vector<std::string>& out) const {
  if (rnn) rnn->list_hooks(out);
  if (conv) conv->list_hooks(out);
}

// Per layer: a bidirectional GRU (LSTM) has 3 (4) gates of d / 2 units each way over an input of
// d and a state of d / 2: 4.5 d^2 (6 d^2); a kernel-3 conv 3 d^2. Saved for backward per token
// and layer: each direction's gates and states, and the layer's output (conv: its input, the
// convolution, the activation and the norm's).
StackCost sequence_encoder_cost(const SequenceEncoderOptions& o) {
  const double d = static_cast<double>(o.d), l = static_cast<double>(o.layers);
  StackCost s;
  switch (o.kind) {
    case EncoderKind::gru:
      s.params_d = l * 4.5 * d * d, s.act_d = l * 6 * d;
      break;
    case EncoderKind::lstm:
      s.params_d = l * 6 * d * d, s.act_d = l * 8 * d;
      break;
    case EncoderKind::conv:
      s.params_d = l * 3 * d * d, s.act_d = l * 6 * d;
      break;
    case EncoderKind::attention:
      break;  // Transformer blocks: transformer_blocks_cost
  }
  return s;
}

}  // namespace qkv::nn
