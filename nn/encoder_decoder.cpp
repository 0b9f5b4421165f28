#include "nn/encoder_decoder.hpp"

#include <algorithm>

#include "nn/model_cost.hpp"
#include "nn/model_sites.hpp"
#include "nn/rnn_seq2seq.hpp"
#include "nn/seq2seq.hpp"

namespace qkv::nn {

std::unique_ptr<EncoderDecoder> make_encoder_decoder(const ModelConfig& c, Generator& gen) {
  switch (c.decoder) {
    case DecoderKind::attention:
      return std::make_unique<Seq2Seq>(c, gen);
    case DecoderKind::gru:
      return std::make_unique<RecurrentSeq2Seq>(c, gen);
  }
  throw Error("model.decoder: unknown kind");
}

StackCost& StackCost::operator+=(const StackCost& o) {
  params_d += o.params_d, params_ff += o.params_ff, act_d += o.act_d, act_ff += o.act_ff;
  pair_always += o.pair_always, pair_dense += o.pair_dense;
  output_in = std::max(output_in, o.output_in);
  return *this;
}

// As make_encoder_decoder: the decoder decides the model; a Transformer's encoder of another
// kind replaces its encoder blocks. Models of one stack (decoder-only, encoder-only) count their
// blocks as the config gives them.
StackCost model_cost(const ModelConfig& c) {
  if (c.kind != ModelKind::encoder_decoder)
    return transformer_blocks_cost(c, c.encoder_layers, c.decoder_layers);
  switch (c.decoder) {
    case DecoderKind::gru:
      return recurrent_seq2seq_cost(c);
    case DecoderKind::attention:
      break;
  }
  if (c.encoder == EncoderKind::attention)
    return transformer_blocks_cost(c, c.encoder_layers, c.decoder_layers);
  StackCost s = transformer_blocks_cost(c, 0, c.decoder_layers);
  s += sequence_encoder_cost({c.encoder, c.d_model, c.encoder_layers, c.norm, c.activation});
  return s;
}

std::vector<AttentionSite> encoder_decoder_sites(const ModelConfig& c) {
  switch (c.decoder) {
    case DecoderKind::attention:
      return seq2seq_sites(c);
    case DecoderKind::gru:
      return recurrent_seq2seq_sites(c);
  }
  throw Error("model.decoder: unknown kind");
}

}  // namespace qkv::nn
