// How an encoder-only classifier (nn/encoder_classifier.hpp) reads one vector out of a sequence
// of hidden states: its names table (core/names.hpp), for the [model] key that will choose it.
//
//   cls    the hidden state at position 0, where the data puts a <cls> token (BERT)
//   mean   the mean of the hidden states over the real (unpadded) positions
#pragma once
#include <span>
#include <string>

#include "core/names.hpp"

namespace qkv::nn {

enum class Pooling { cls, mean };
inline constexpr EnumName<Pooling> kPoolingNames[] = {{"cls", Pooling::cls},
                                                      {"mean", Pooling::mean}};
constexpr std::span<const EnumName<Pooling>> names_of(Pooling) { return kPoolingNames; }

// "cls" | "mean"; otherwise qkv::Error naming the key "pool".
inline Pooling parse_pooling(const std::string& name) { return parse_name<Pooling>(name, "pool"); }

}  // namespace qkv::nn
