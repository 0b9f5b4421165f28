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

}  // namespace

Heatmap attention_heatmap(const std::vector<Tensor>& list, const nn::AttentionSite& site,
                          const std::vector<std::string>& rows,
                          const std::vector<std::string>& cols, int64_t layer_arg,
                          const std::string& head, int cell, const char* op) {
  const int64_t layers = static_cast<int64_t>(list.size());
  QKV_CHECK(layers > 0, op, "the model has no ", site.title, " layers");
  const int64_t layer = layer_arg == 0 ? layers : layer_arg;
  QKV_CHECK(layer >= 1 && layer <= layers, op, "--layer must be in 1..", layers, " (", site.title,
            " layers of this model), got ", layer_arg);
  const Tensor w = list[layer - 1].to(DType::f64);  // (h, n, m)
  const auto [mat, head_text] = pick_head(w, head, op);
  Heatmap hm;
  hm.rows = mat.size(0);
  hm.cols = mat.size(1);
  hm.values = to_vector<double>(mat.contiguous());
  hm.cell = cell;
  hm.title = site.title + ", layer " + std::to_string(layer) + "/" + std::to_string(layers) + ", " +
             head_text;
  hm.row_labels = rows;
  hm.col_labels = cols;
  hm.x_label = site.key_axis;
  hm.y_label = site.query_axis;
  return hm;
}

}  // namespace qkv::figures
