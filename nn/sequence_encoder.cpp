#include "nn/sequence_encoder.hpp"

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

}  // namespace qkv::nn
