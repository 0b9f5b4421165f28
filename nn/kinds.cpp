#include "nn/kinds.hpp"

namespace qkv::nn {

namespace {

// `attention = "dot"`, or `attention = "dot" or "x"`: the scorers with a capability.
std::string scorers_with(bool AttentionTraits::*capability) {
  std::string names;
  for (const EnumName<AttentionKind>& n : kAttentionNames) {
    if (!(traits_of(n.value).*capability)) continue;
    names += (names.empty() ? "attention = \"" : " or \"") + std::string(n.name) + "\"";
  }
  return names;  // never empty: dot can do everything
}

}  // namespace

std::optional<KindConflict> attention_conflict(AttentionKind attention, PositionKind position,
                                               int64_t window, double attention_dropout,
                                               int64_t d_head, AttentionScale scale) {
  const AttentionTraits can = traits_of(attention);
  const std::string scorer = "attention = \"" + std::string(name_of(attention)) + "\"";
  if (position == PositionKind::rope && d_head % 2 != 0)
    return KindConflict{"position", "rope needs an even head width, got d_model / heads = " +
                                        std::to_string(d_head)};
  if (position == PositionKind::relative && !can.takes_bias)
    return KindConflict{"position", "relative position bias needs " +
                                        scorers_with(&AttentionTraits::takes_bias) + ", got " +
                                        scorer};
  if (window != 0 && !can.takes_window)
    return KindConflict{
        "window",
        "sliding windows need " + scorers_with(&AttentionTraits::takes_window) + ", got " + scorer};
  if (attention_dropout != 0 && !can.drops_weights)
    return KindConflict{"attention_dropout",
                        "must be 0 with " + scorer + " (it forms no attention weights to drop)"};
  if (!scale.is_default() && !can.takes_scale)
    return KindConflict{"attention_scale", "a scale on q . k needs " +
                                               scorers_with(&AttentionTraits::takes_scale) +
                                               ", got " + scorer + " (0: the default)"};
  return std::nullopt;
}

}  // namespace qkv::nn
