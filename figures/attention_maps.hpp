// Attention weights drawn as labelled heatmaps: the figure half of `qkv attention` and of the
// attention maps on `qkv report`'s page (apps/attention_maps.hpp runs the model to get them).
// Which attention a map shows is an attention site (nn/attention_site.hpp): its title names the
// figure and its axes' words label the axes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "figures/heatmap.hpp"
#include "nn/attention_site.hpp"

namespace qkv::figures {

// One map of a site as a heatmap: layers are its weights, each layer's (h, n, m); rows and cols
// the tokens of its queries (n) and keys (m). layer is 1-based (0: the last); head is "mean" or
// a 1-based head. Bad values throw qkv::Error naming `op` and the valid range. cell: pixels per
// cell side.
Heatmap attention_heatmap(const std::vector<Tensor>& layers, const nn::AttentionSite& site,
                          const std::vector<std::string>& rows,
                          const std::vector<std::string>& cols, int64_t layer,
                          const std::string& head, int cell = 32, const char* op = "attention");

}  // namespace qkv::figures
