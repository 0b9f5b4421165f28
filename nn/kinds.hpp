// The kinds a model config chooses among ([model] kind, position, attention, activation), each
// an enum with its names table (core/names.hpp), and the rules on which kinds go together.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/names.hpp"
#include "nn/attention_scale.hpp"

namespace qkv::nn {

// encoder_decoder: nn::Seq2Seq; decoder: nn::DecoderLM (a language model); encoder:
// nn::EncoderClassifier (a classifier).
enum class ModelKind { encoder_decoder, decoder, encoder };
inline constexpr EnumName<ModelKind> kModelKindNames[] = {
    {"encoder_decoder", ModelKind::encoder_decoder},
    {"decoder", ModelKind::decoder},
    {"encoder", ModelKind::encoder}};
constexpr std::span<const EnumName<ModelKind>> names_of(ModelKind) { return kModelKindNames; }

// An encoder-decoder's encoder ([model] encoder): attention (the Transformer's blocks), or the
// lesson's alternatives in its place (nn/sequence_encoder.hpp): gru or lstm (bidirectional, each
// direction d_model / 2 wide), conv (a stack of convolutions with residuals and a norm).
enum class EncoderKind { attention, gru, lstm, conv };
inline constexpr EnumName<EncoderKind> kEncoderNames[] = {{"attention", EncoderKind::attention},
                                                          {"gru", EncoderKind::gru},
                                                          {"lstm", EncoderKind::lstm},
                                                          {"conv", EncoderKind::conv}};
constexpr std::span<const EnumName<EncoderKind>> names_of(EncoderKind) { return kEncoderNames; }

// An encoder-decoder's decoder ([model] decoder): attention (the Transformer's blocks, reading
// the source through cross-attention: nn::Seq2Seq) or gru (one recurrent layer, the decoder of
// Cho et al. 2014 and Bahdanau et al. 2015: nn::RecurrentSeq2Seq, nn/rnn_seq2seq.hpp).
enum class DecoderKind { attention, gru };
inline constexpr EnumName<DecoderKind> kDecoderNames[] = {{"attention", DecoderKind::attention},
                                                          {"gru", DecoderKind::gru}};
constexpr std::span<const EnumName<DecoderKind>> names_of(DecoderKind) { return kDecoderNames; }

// sinusoidal | learned: added to the embeddings (nn/positional.hpp); relative | rope: inside
// self-attention (nn/relative_bias.hpp, nn/rotary.hpp); none: no positions.
enum class PositionKind { sinusoidal, learned, relative, rope, none };
inline constexpr EnumName<PositionKind> kPositionNames[] = {
    {"sinusoidal", PositionKind::sinusoidal},
    {"learned", PositionKind::learned},
    {"relative", PositionKind::relative},
    {"rope", PositionKind::rope},
    {"none", PositionKind::none}};
constexpr std::span<const EnumName<PositionKind>> names_of(PositionKind) { return kPositionNames; }

// [model] attention: the registry of attention scorers, one line each. A line makes the enum
// value, its name in configs and its capabilities; the scorer itself is scorer_NAME, defined in
// its own file under nn/scorers/ (declared by nn/attention_variants.hpp, built without a CMake
// edit). A new scorer is its line, its file and its test (docs/extending.md).
//
//   X(name, bias, window, drops, dense, scale)
//     bias    takes an additive bias on its scores ([model] position = "relative" needs one)
//     window  can restrict each query to a band of keys ([model] window)
//     drops   forms attention weights that [model] attention_dropout can drop
//     dense   keeps a (B, h, n, m) tensor per layer in training (the memory estimate)
//     scale   multiplies q . k by a scale ([model] attention_scale; nn/attention_scale.hpp)
//
//   dot        scaled dot product, softmax(q k^T s) v (nn/attention.hpp), fused kernel
//   additive   Bahdanau's w . tanh(q_i + k_j) per head
//   linear     Katharopoulos et al.'s elu + 1 feature maps, O(n d^2)
#define QKV_ATTENTIONS(X)                      \
  X(dot, true, true, true, false, true)        \
  X(additive, false, false, true, true, false) \
  X(linear, false, false, false, false, false)

#define QKV_ATTENTION_ENUM(name, bias, window, drops, dense, scale) name,
enum class AttentionKind { QKV_ATTENTIONS(QKV_ATTENTION_ENUM) };
#undef QKV_ATTENTION_ENUM

#define QKV_ATTENTION_NAME(name, bias, window, drops, dense, scale) {#name, AttentionKind::name},
inline constexpr EnumName<AttentionKind> kAttentionNames[] = {QKV_ATTENTIONS(QKV_ATTENTION_NAME)};
#undef QKV_ATTENTION_NAME
constexpr std::span<const EnumName<AttentionKind>> names_of(AttentionKind) {
  return kAttentionNames;
}

// A scorer's line of QKV_ATTENTIONS: what it can do.
struct AttentionTraits {
  bool takes_bias, takes_window, drops_weights, dense_scores, takes_scale;
};
constexpr AttentionTraits traits_of(AttentionKind k) {
  switch (k) {
#define QKV_ATTENTION_TRAITS(name, bias, window, drops, dense, scale) \
  case AttentionKind::name:                                           \
    return {bias, window, drops, dense, scale};
    QKV_ATTENTIONS(QKV_ATTENTION_TRAITS)
#undef QKV_ATTENTION_TRAITS
  }
  return {};
}

// The feed-forward network's nonlinearity: relu, gelu, relu2 (relu(x)^2, as modded-nanogpt) or
// swiglu (a gated FFN, W2(silu(W1 x) * W3 x): a third matrix W3, nn/layers.hpp).
enum class Activation { relu, gelu, relu2, swiglu };
inline constexpr EnumName<Activation> kActivationNames[] = {{"relu", Activation::relu},
                                                            {"gelu", Activation::gelu},
                                                            {"relu2", Activation::relu2},
                                                            {"swiglu", Activation::swiglu}};
constexpr std::span<const EnumName<Activation>> names_of(Activation) { return kActivationNames; }

// Every normalisation of the blocks and stacks: LayerNorm, or RMSNorm (x / rms(x) * gain,
// no mean subtracted, no bias).
enum class NormKind { layernorm, rmsnorm };
inline constexpr EnumName<NormKind> kNormNames[] = {{"layernorm", NormKind::layernorm},
                                                    {"rmsnorm", NormKind::rmsnorm}};
constexpr std::span<const EnumName<NormKind>> names_of(NormKind) { return kNormNames; }

// A combination of attention settings that cannot work: the [model] key at fault and why.
struct KindConflict {
  std::string key;  // "position", "window", "attention_dropout", "attention_scale"
  std::string why;
};
// The one place the attention scorer's compatibility rules live, asked by ModelConfig::validate
// and by MultiHeadAttention. d_head: the head width d_model / heads.
std::optional<KindConflict> attention_conflict(AttentionKind attention, PositionKind position,
                                               int64_t window, double attention_dropout,
                                               int64_t d_head, AttentionScale scale = {});

}  // namespace qkv::nn
