#include "nn/encoder_decoder.hpp"

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
