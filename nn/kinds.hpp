// The kinds a model config chooses among ([model] kind, position, attention, activation), each
// an enum with its names table (core/names.hpp), and the rules on which kinds go together.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/names.hpp"

namespace qkv::nn {

// encoder_decoder: nn::Seq2Seq; decoder: nn::DecoderLM (a language model).
enum class ModelKind { encoder_decoder, decoder };
inline constexpr EnumName<ModelKind> kModelKindNames[] = {
    {"encoder_decoder", ModelKind::encoder_decoder}, {"decoder", ModelKind::decoder}};
constexpr std::span<const EnumName<ModelKind>> names_of(ModelKind) { return kModelKindNames; }

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

// The scorer of every attention layer (nn/attention_variants.hpp).
enum class AttentionKind { dot, additive, linear };
inline constexpr EnumName<AttentionKind> kAttentionNames[] = {{"dot", AttentionKind::dot},
                                                              {"additive", AttentionKind::additive},
                                                              {"linear", AttentionKind::linear}};
constexpr std::span<const EnumName<AttentionKind>> names_of(AttentionKind) {
  return kAttentionNames;
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
  std::string key;  // "position", "window", "attention_dropout"
  std::string why;
};
// The one place the attention scorer's compatibility rules live, asked by ModelConfig::validate
// and by MultiHeadAttention. d_head: the head width d_model / heads.
std::optional<KindConflict> attention_conflict(AttentionKind attention, PositionKind position,
                                               int64_t window, double attention_dropout,
                                               int64_t d_head);

}  // namespace qkv::nn
