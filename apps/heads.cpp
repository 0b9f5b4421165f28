// qkv heads RUN [--split valid] [--json] [--out DIR]: one row per head of every attention --
// importance, the loss change when it is removed, its entropy and pattern scores
// (inspect/head_table.hpp); --out writes one heatmap (layer x head) per score and attention.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "apps/commands.hpp"
#include "figures/heatmap.hpp"
#include "inspect/head_table.hpp"
#include "inspect/work.hpp"
#include "run/inference.hpp"

namespace qkv::app {

namespace {

// Each attention's heads under a header of its columns (inspect::head_columns: the registry's
// scores after the table's own), each at least 16 wide.
void print_table(const inspect::HeadTable& t) {
  std::printf(
      "split %s: loss %.4f over %lld batches; pattern scores on repeated sequences of 2 x %lld\n",
      t.split.c_str(), t.loss, static_cast<long long>(t.batches),
      static_cast<long long>(t.probe_length));
  const auto width = [](const inspect::HeadColumn& c) {
    return static_cast<int>(std::max<size_t>(16, c.name.size()));
  };
  std::string attention;
  for (const inspect::HeadRow& r : t.rows) {
    const auto cols = inspect::head_values(r);
    if (r.attention != attention) {
      attention = r.attention;
      std::printf("\n%-12s", (attention + " head").c_str());
      for (const auto& [c, v] : cols) std::printf(" %*s", width(*c), c->name.c_str());
      std::printf("\n");
    }
    std::printf("%-12s", r.name.c_str());
    for (const auto& [c, v] : cols) std::printf(" %*.*f", width(*c), c->decimals, v);
    std::printf("\n");
  }
}

// One heatmap (layers x heads) per score of each attention, into dir.
void write_heatmaps(const inspect::HeadTable& t, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::map<std::pair<std::string, std::string>, std::vector<const inspect::HeadRow*>> groups;
  for (const inspect::HeadRow& r : t.rows)
    for (const auto& [c, v] : inspect::head_values(r)) groups[{r.attention, c->name}].push_back(&r);
  int written = 0;
  for (const auto& [key, rows] : groups) {
    figures::Heatmap hm;
    hm.title = key.first + ": " + key.second;
    hm.x_label = "head", hm.y_label = "layer";
    for (const inspect::HeadRow* r : rows) {
      hm.rows = std::max(hm.rows, r->layer + 1), hm.cols = std::max(hm.cols, r->head + 1);
      for (const auto& [c, v] : inspect::head_values(*r))
        if (c->name == key.second) hm.values.push_back(v);
    }
    for (int64_t l = 0; l < hm.rows; ++l) hm.row_labels.push_back(std::to_string(l));
    for (int64_t h = 0; h < hm.cols; ++h) hm.col_labels.push_back(std::to_string(h));
    const auto [lo, hi] = std::minmax_element(hm.values.begin(), hm.values.end());
    hm.vmin = std::min(0.0, *lo), hm.vmax = std::max(*hi, hm.vmin + 1e-12);
    write_heatmap(dir + "/" + key.first + "_" + key.second + ".png", hm);
    ++written;
  }
  std::fprintf(stderr, "wrote %d heatmaps to %s\n", written, dir.c_str());
}

}  // namespace

std::string heads_columns_help() {
  std::string out = "Columns (an attention's table has those of its kind):";
  for (const inspect::HeadColumn& c : inspect::head_columns())
    out += "\n  " + c.name + " (" + c.attention + "): " + c.description;
  return out;
}

int cmd_heads(const HeadsArgs& a) {
  const auto inf = run::open_inference(
      a.run_dir,
      {.checkpoint = a.checkpoint, .precision = a.precision, .threads = a.threads, .op = "heads"});
  // --ablate: the table of a model with those heads removed (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "heads");
  inspect::HeadTableOptions o{.split = a.split, .probes = a.probes, .seed = a.seed};
  o.max_batches =
      inspect::head_table_batches(*inf, o, a.batches, a.max_work, "heads",
                                  "--max-work; ask for fewer --batches or --probes, or raise it");
  const inspect::HeadTable t = inspect::head_table(*inf, o);
  if (a.json)
    std::printf("%s\n", inspect::head_table_json(t).dump(2).c_str());
  else
    print_table(t);
  std::fflush(stdout);  // the table before the heatmaps' note on stderr, whatever its size
  if (!a.out.empty()) write_heatmaps(t, a.out);
  return 0;
}

}  // namespace qkv::app
