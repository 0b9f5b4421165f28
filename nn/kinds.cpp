#include "nn/kinds.hpp"

namespace qkv::nn {

std::optional<KindConflict> attention_conflict(AttentionKind attention, PositionKind position,
                                               int64_t window, double attention_dropout,
                                               int64_t d_head) {
  const std::string scorer = "attention = \"" + std::string(name_of(attention)) + "\"";
  if (position == PositionKind::rope && d_head % 2 != 0)
    return KindConflict{"position", "rope needs an even head width, got d_model / heads = " +
                                        std::to_string(d_head)};
  if (position == PositionKind::relative && attention != AttentionKind::dot)
    return KindConflict{"position",
                        "relative position bias needs attention = \"dot\", got " + scorer};
  if (window != 0 && attention != AttentionKind::dot)
    return KindConflict{"window", "sliding windows need attention = \"dot\", got " + scorer};
  if (attention == AttentionKind::linear && attention_dropout != 0)
    return KindConflict{"attention_dropout",
                        "must be 0 with attention = \"linear\" (it forms no attention weights to "
                        "drop)"};
  return std::nullopt;
}

}  // namespace qkv::nn
