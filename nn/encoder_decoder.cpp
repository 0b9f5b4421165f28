#include "nn/encoder_decoder.hpp"

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

}  // namespace qkv::nn
