// Attention weights drawn as labelled heatmaps: the figure half of `qkv attention` and of the
// attention maps on `qkv report`'s page (apps/attention_maps.hpp runs the model to get them).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/names.hpp"
#include "core/tensor.hpp"
#include "figures/heatmap.hpp"

namespace qkv::figures {

// The tokens on a map's axes: the source, the decoder's input (<bos> + output) and the
// decoder's labels (output + <eos>), one label per position of the maps.
struct AttentionLabels {
  std::vector<std::string> src, tgt_in, tgt_out;
  // A decoder-only language model: its only maps are the causal self-attention over one text,
  // labelled by src on both axes.
  bool language_model = false;
};

// Which attention a map shows: the encoder's self-attention, the decoder's, or the decoder's
// cross-attention over the source (`qkv attention --kind`).
enum class MapKind { self, decoder_self, cross };
inline constexpr EnumName<MapKind> kMapKindNames[] = {
    {"self", MapKind::self}, {"decoder-self", MapKind::decoder_self}, {"cross", MapKind::cross}};
constexpr std::span<const EnumName<MapKind>> names_of(MapKind) { return kMapKindNames; }
// The kind a --kind names; else Error("OP: --kind must be self (encoder), ...").
MapKind parse_map_kind(const std::string& name, const char* op);

// One map as a heatmap: kind is self (encoder), decoder-self or cross; layer is 1-based (0:
// the last); head is "mean" or a 1-based head. layers: that kind's weights, each layer's
// (h, n, m) (a language model's: its causal self-attention, whatever the kind but cross). Bad
// values throw qkv::Error naming `op` and the valid range. cell: pixels per cell side.
Heatmap attention_heatmap(const std::vector<Tensor>& layers, const AttentionLabels& labels,
                          MapKind kind, int64_t layer, const std::string& head, int cell = 32,
                          const char* op = "attention");

}  // namespace qkv::figures
