// Attention weights as labelled heatmaps (see attention_maps.hpp).
#include "figures/attention_maps.hpp"

#include "core/error.hpp"

namespace qkv::figures {

namespace {

// The "mean" of the heads or one 1-based head of w (h, n, m), and how to say which.
std::pair<Tensor, std::string> pick_head(const Tensor& w, const std::string& head, const char* op) {
  const int64_t heads = w.size(0);
  if (head == "mean")
    return {mean(w, {0}), heads == 1 ? "1 head" : "mean of " + std::to_string(heads) + " heads"};
  int64_t h = 0;
  try {
    size_t used = 0;
    h = std::stoll(head, &used);
    if (used != head.size()) h = 0;
  } catch (const std::exception&) {
    h = 0;
  }
  QKV_CHECK(h >= 1 && h <= heads, op, "--head must be mean or a head in 1..", heads, ", got '",
            head, "'");
  return {w.select(0, h - 1), "head " + std::to_string(h) + " of " + std::to_string(heads)};
}

// Title and axes of a map of `kind` (a language model has only its causal self-attention).
void label(Heatmap& hm, const AttentionLabels& labels, MapKind kind, const std::string& where) {
  if (labels.language_model) {
    hm.title = "causal self-attention, " + where;
    hm.row_labels = hm.col_labels = labels.src;
    hm.x_label = "key (the text so far)";
    hm.y_label = "query (token)";
    return;
  }
  switch (kind) {
    case MapKind::self:
      hm.title = "encoder self-attention, " + where;
      hm.row_labels = hm.col_labels = labels.src;
      hm.x_label = "key (source)";
      hm.y_label = "query (source)";
      return;
    case MapKind::cross:
      hm.title = "cross-attention, " + where;
      hm.row_labels = labels.tgt_out;
      hm.col_labels = labels.src;
      hm.x_label = "key (source)";
      hm.y_label = "output token";
      return;
    case MapKind::decoder_self:
      break;
  }
  hm.title = "decoder self-attention, " + where;
  hm.row_labels = labels.tgt_out;
  hm.col_labels = labels.tgt_in;
  hm.x_label = "key (decoder input)";
  hm.y_label = "output token";
}

}  // namespace

MapKind parse_map_kind(const std::string& name, const char* op) {
  const std::optional<MapKind> k = find_name<MapKind>(name);
  QKV_CHECK(k, op, "--kind must be self (encoder), decoder-self or cross, got '", name, "'");
  return *k;
}

Heatmap attention_heatmap(const std::vector<Tensor>& list, const AttentionLabels& labels,
                          MapKind kind_enum, int64_t layer_arg, const std::string& head, int cell,
                          const char* op) {
  const std::string kind(name_of(kind_enum));
  const bool lm = labels.language_model;
  QKV_CHECK(!lm || kind_enum != MapKind::cross, op,
            "a language model (model.kind = \"decoder\") has only causal self-attention: --kind "
            "self, not cross");
  const int64_t layers = static_cast<int64_t>(list.size());
  QKV_CHECK(layers > 0, op, "the model has no ", kind, "-attention layers");
  const int64_t layer = layer_arg == 0 ? layers : layer_arg;
  QKV_CHECK(layer >= 1 && layer <= layers, op, "--layer must be in 1..", layers, " (", kind,
            "-attention layers of this model), got ", layer_arg);
  const Tensor w = list[layer - 1].to(DType::f64);  // (h, n, m)
  const auto [mat, head_text] = pick_head(w, head, op);
  Heatmap hm;
  hm.rows = mat.size(0);
  hm.cols = mat.size(1);
  hm.values = to_vector<double>(mat.contiguous());
  hm.cell = cell;
  label(hm, labels, kind_enum,
        "layer " + std::to_string(layer) + "/" + std::to_string(layers) + ", " + head_text);
  return hm;
}

}  // namespace qkv::figures
