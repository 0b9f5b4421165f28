// qkv attention DIR TEXT --out map.png [--kind SITE] [--layer L|all] [--head H|mean|all]: runs
// a trained model on one input and draws one attention matrix as a labelled heatmap, or with
// `all` a grid of them (a row per site and layer, a column per head). SITE is one of the model's
// attention sites (nn/attention_site.hpp: encoder, decoder, cross; self for a model of one
// site), by default its last (an encoder-decoder's cross-attention).
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

// --layer all and/or --head all: one figure, a row per layer of each site (or of the one
// --kind), a column per head.
std::vector<std::vector<Heatmap>> attention_grid(const Inspection& att, const AttentionArgs& a) {
  std::vector<const run::AttentionView*> views;
  if (!a.kind.empty())
    views = {&view_named(att, a.kind)};
  else
    for (const run::AttentionView& v : att.views) views.push_back(&v);
  std::vector<std::vector<Heatmap>> rows;
  for (const run::AttentionView* v : views) {
    const int64_t heads = v->site.heads;
    for (const int64_t layer : layers_named(a.layer, static_cast<int64_t>(v->layers.size()))) {
      std::vector<Heatmap> row;
      if (a.head == "all")
        for (int64_t h = 1; h <= heads; ++h)
          row.push_back(attention_heatmap(*v, layer, std::to_string(h), a.cell));
      else
        row.push_back(attention_heatmap(*v, layer, a.head, a.cell));
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

// "encoder, decoder or cross": the sites' names, for messages.
std::string site_names(const Inspection& a) {
  std::string s;
  for (size_t i = 0; i < a.views.size(); ++i)
    s += (i == 0 ? "" : i + 1 == a.views.size() ? " or " : ", ") + a.views[i].site.name;
  return s;
}

}  // namespace

const run::AttentionView& view_named(const Inspection& a, const std::string& kind, const char* op) {
  QKV_CHECK(!a.views.empty(), op, "the model has no attention");
  for (const run::AttentionView& v : a.views)
    if (v.site.name == kind) return v;
  // The spellings --kind has long accepted: self (the encoder's self-attention), decoder-self.
  const std::string alias = kind == "self" ? "encoder" : kind == "decoder-self" ? "decoder" : "";
  for (const run::AttentionView& v : a.views)
    if (!alias.empty() && v.site.name == alias) return v;
  if (a.views.size() == 1 && !alias.empty()) return a.views[0];
  if (a.views.size() == 1)
    throw Error(cat(op, ": --kind ", kind, ": this model has only ", a.views[0].site.title,
                    " (--kind ", a.views[0].site.name, ")"));
  throw Error(
      cat(op, ": --kind must be ", site_names(a), " (or self, decoder-self), got '", kind, "'"));
}

figures::Heatmap attention_heatmap(const run::AttentionView& v, int64_t layer,
                                   const std::string& head, int cell, const char* op) {
  return figures::attention_heatmap(v.layers, v.site, v.rows, v.cols, layer, head, cell, op);
}

int cmd_attention(const AttentionArgs& a) {
  QKV_CHECK(!a.out.empty(), "attention", "--out FILE.png (or .svg) is required");
  const auto inf = run::open_inference(a.run_dir, {.checkpoint = a.checkpoint,
                                                   .precision = a.precision,
                                                   .threads = a.threads,
                                                   .op = "attention"});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "attention");
  const Inspection att = inf->inspect(inf->encode(a.text, "attention"));
  // By default the map that shows the most: the model's last site (cross-attention).
  const run::AttentionView& view =
      view_named(att, a.kind.empty() ? inf->default_map_kind() : a.kind);
  const std::string output = inf->output_name() + ": " + inf->text(att.output);
  if (a.layer == "all" || a.head == "all") {
    const std::vector<std::vector<Heatmap>> rows = attention_grid(att, a);
    write_heatmap_grid(a.out, rows);
    std::printf("%s\nwrote %s: %zu rows (kind x layer) of %zu maps\n", output.c_str(),
                a.out.c_str(), rows.size(), rows[0].size());
    return 0;
  }
  const Heatmap hm = attention_heatmap(view, layers_named(a.layer, 0)[0], a.head, a.cell);
  write_heatmap(a.out, hm);
  const HeatmapLayout l = heatmap_layout(hm);
  std::printf("%s\nwrote %s (%d x %d): %s, %lld x %lld\n", output.c_str(), a.out.c_str(), l.width,
              l.height, hm.title.c_str(), static_cast<long long>(hm.rows),
              static_cast<long long>(hm.cols));
  return 0;
}

}  // namespace qkv::app
