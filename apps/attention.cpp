// qkv attention DIR TEXT --out map.png [--kind self|decoder-self|cross] [--layer L|all] [--head
// H|mean|all]: runs a trained model on one input and draws one attention matrix as a labelled
// heatmap, or with `all` a grid of them (a row per kind and layer, a column per head).
// A language model (model.kind = "decoder") draws the causal self-attention over TEXT itself.
#include <algorithm>
#include <cstdio>

#include "apps/attention_maps.hpp"
#include "apps/commands.hpp"
#include "figures/attention_maps.hpp"
#include "figures/heatmap_grid.hpp"
#include "inspect/heads.hpp"

namespace qkv::app {

using namespace figures;
using run::Inspection;

namespace {

// The layers (1-based) one --layer value names: "all", a number, or empty for the last.
std::vector<int64_t> layers_named(const std::string& layer, int64_t layers) {
  std::vector<int64_t> out;
  if (layer == "all")
    for (int64_t l = 1; l <= layers; ++l) out.push_back(l);
  else
    out.push_back(layer.empty() ? 0 : std::stoll(layer));  // checked by the CLI and the figure
  return out;
}

// The model has only the causal self-attention of a language model: figures' `self` is it.
bool only_self(const Inspection& att) {
  return layers_of(att, figures::MapKind::self).empty() &&
         layers_of(att, figures::MapKind::cross).empty();
}

// --layer all and/or --head all: one figure, a row per layer of each kind (encoder self,
// decoder self, cross; or the one --kind), a column per head.
std::vector<std::vector<Heatmap>> attention_grid(const run::Inference& inf, const Inspection& att,
                                                 const AttentionArgs& a) {
  std::vector<figures::MapKind> kinds;
  if (!a.kind.empty())
    kinds = {figures::parse_map_kind(a.kind, "attention")};
  else
    for (const auto& [name, kind] : figures::kMapKindNames)
      if (!layers_of(att, kind).empty()) kinds.push_back(kind);
  const int64_t heads = attention_heads(att);
  std::vector<std::vector<Heatmap>> rows;
  for (const figures::MapKind kind : kinds) {
    const auto& list = layers_of(att, only_self(att) ? figures::MapKind::decoder_self : kind);
    for (const int64_t layer : layers_named(a.layer, static_cast<int64_t>(list.size()))) {
      std::vector<Heatmap> row;
      if (a.head == "all")
        for (int64_t h = 1; h <= heads; ++h)
          row.push_back(attention_heatmap(inf, att, kind, layer, std::to_string(h), a.cell));
      else
        row.push_back(attention_heatmap(inf, att, kind, layer, a.head, a.cell));
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace

const std::vector<Tensor>& layers_of(const Inspection& a, figures::MapKind kind) {
  static const std::vector<Tensor> none;
  const auto kind_of = [](const std::string& view_kind) {
    return view_kind == "encoder_self" ? figures::MapKind::self
           : view_kind == "cross"      ? figures::MapKind::cross
                                       : figures::MapKind::decoder_self;  // or "causal"
  };
  for (const run::AttentionView& v : a.views)
    if (kind_of(v.kind) == kind) return v.layers;
  return none;
}

int64_t attention_heads(const Inspection& a) {
  for (const figures::MapKind k :
       {figures::MapKind::cross, figures::MapKind::self, figures::MapKind::decoder_self})
    if (const auto& list = layers_of(a, k); !list.empty()) return list[0].size(0);
  return 0;
}

figures::Heatmap attention_heatmap(const run::Inference& inf, const Inspection& a,
                                   figures::MapKind kind, int64_t layer, const std::string& head,
                                   int cell, const char* op) {
  const figures::AttentionLabels labels{inf.input_labels(a.input), inf.output_labels(a.tgt_in),
                                        inf.output_labels(a.tgt_out), only_self(a)};
  const auto& list = layers_of(a, labels.language_model ? figures::MapKind::decoder_self : kind);
  return figures::attention_heatmap(list, labels, kind, layer, head, cell, op);
}

int cmd_attention(const AttentionArgs& a) {
  const std::optional<figures::MapKind> asked =
      a.kind.empty() ? std::nullopt : std::optional(figures::parse_map_kind(a.kind, "attention"));
  QKV_CHECK(!a.out.empty(), "attention", "--out FILE.png (or .svg) is required");
  const auto inf = run::open_inference(a.run_dir, {.checkpoint = a.checkpoint,
                                                   .precision = a.precision,
                                                   .threads = a.threads,
                                                   .op = "attention"});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "attention");
  // By default the map that shows the most: cross-attention, or a language model's only kind.
  const figures::MapKind kind =
      asked ? *asked : figures::parse_map_kind(inf->default_map_kind(), "attention");
  const Inspection att = inf->inspect(inf->encode(a.text, "attention"));
  const std::string output = inf->output_name() + ": " + inf->text(att.output);
  if (a.layer == "all" || a.head == "all") {
    const std::vector<std::vector<Heatmap>> rows = attention_grid(*inf, att, a);
    write_heatmap_grid(a.out, rows);
    std::printf("%s\nwrote %s: %zu rows (kind x layer) of %zu maps\n", output.c_str(),
                a.out.c_str(), rows.size(), rows[0].size());
    return 0;
  }
  const Heatmap hm =
      attention_heatmap(*inf, att, kind, layers_named(a.layer, 0)[0], a.head, a.cell);
  write_heatmap(a.out, hm);
  const HeatmapLayout l = heatmap_layout(hm);
  std::printf("%s\nwrote %s (%d x %d): %s, %lld x %lld\n", output.c_str(), a.out.c_str(), l.width,
              l.height, hm.title.c_str(), static_cast<long long>(hm.rows),
              static_cast<long long>(hm.cols));
  return 0;
}

}  // namespace qkv::app
