#include "nn/encoder_decoder.hpp"

#include "nn/seq2seq.hpp"

namespace qkv::nn {

std::unique_ptr<EncoderDecoder> make_encoder_decoder(const ModelConfig& c, Generator& gen) {
  return std::make_unique<Seq2Seq>(c, gen);
}

}  // namespace qkv::nn
