// What training a model of a config holds besides its vocabulary tables, for run/limits' memory
// estimate: the parameters of its layers and the floats one batch saves for backward, split by
// the key that sizes them. Rough by design (run/limits.hpp: within about a factor of 2 of the
// measured peak; tests/run/test_limits.cpp measures it).
//
// Each kind of model states its own, in its own file: Transformer blocks (seq2seq.cpp, for every
// model made of them), an encoder of another kind (sequence_encoder.cpp), the recurrent
// encoder-decoder (rnn_seq2seq.cpp). model_cost (encoder_decoder.cpp) asks which, once, as
// make_encoder_decoder does; a consumer never asks.
#pragma once
#include <cstdint>

namespace qkv::nn {

struct ModelConfig;
struct SequenceEncoderOptions;

struct StackCost {
  double params_d = 0;   // parameters that grow with d_model (d^2 terms)
  double params_ff = 0;  // parameters of the feed-forward layers (d * d_ff terms)
  // Floats saved for backward per token of the batch (a layer's tokens: its side's), summed over
  // the layers, by what sizes them.
  double act_d = 0, act_ff = 0;
  // Floats per (query, key) pair: always formed (additive scores materialise tanh(q + k), d
  // wide), and formed only where attention weights are (attention dropout, a scorer with
  // dense scores, entropy logging, relative positions: the caller knows which).
  double pair_always = 0, pair_dense = 0;
  double output_in = 0;  // the output layer's input width (its parameters: tgt_vocab x (this + 1))
  StackCost& operator+=(const StackCost& o);
};

// c's model: a Transformer (encoder-decoder, decoder-only, encoder-only), one with another
// encoder kind, or the recurrent encoder-decoder.
StackCost model_cost(const ModelConfig& c);

// The parts, each defined in its kind's file.
// `enc` encoder and `dec` decoder Transformer blocks of c's width, heads and feed-forward.
StackCost transformer_blocks_cost(const ModelConfig& c, int64_t enc, int64_t dec);
// A SequenceEncoder (gru, lstm, conv) of o's width and layers.
StackCost sequence_encoder_cost(const SequenceEncoderOptions& o);
// nn::RecurrentSeq2Seq of c: its encoder, decoder and output.
StackCost recurrent_seq2seq_cost(const ModelConfig& c);

}  // namespace qkv::nn
