// qkv patch RUN --clean "..." --corrupt "...": activation patching over every head's output
// and every (layer, position) of the residual stream (inspect/patch.hpp), as tables, --json,
// and with --out DIR two heatmaps.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/commands.hpp"
#include "figures/heatmap.hpp"
#include "inspect/heads.hpp"
#include "inspect/patch.hpp"
#include "inspect/work.hpp"
#include "run/inference.hpp"

namespace qkv::app {

namespace {

void print_table(const inspect::Patching& r) {
  std::printf(
      "clean answer '%s', corrupted answer '%s'; logit difference %.4f clean, %.4f "
      "corrupted\n\nrestored fraction, patching each head's output:\n",
      r.clean_answer.c_str(), r.corrupt_answer.c_str(), r.clean_diff, r.corrupt_diff);
  for (const auto& h : r.heads) std::printf("  %-14s %8.4f\n", h.name.c_str(), h.restored);
  std::printf("\nrestored fraction, patching %s at one position:\n%-6s", r.stream.c_str(), "L");
  for (const auto& p : r.positions) std::printf(" %8.8s", p.c_str());
  std::printf("\n");
  for (size_t l = 0; l < r.residual.size(); ++l) {
    std::printf("%-6zu", l);
    for (const double v : r.residual[l]) std::printf(" %8.4f", v);
    std::printf("\n");
  }
}

figures::Heatmap fraction_map(std::string title, std::string x, std::string y) {
  figures::Heatmap hm;
  hm.title = std::move(title), hm.x_label = std::move(x), hm.y_label = std::move(y);
  hm.vmin = 0, hm.vmax = 1;
  return hm;
}

void write_heatmaps(const inspect::Patching& r, const std::string& dir) {
  std::filesystem::create_directories(dir);
  figures::Heatmap heads =
      fraction_map("restored fraction: head outputs", "head", "attention.layer");
  for (const auto& h : r.heads) {
    const std::string row = h.name.substr(0, h.name.rfind('.'));
    if (heads.row_labels.empty() || heads.row_labels.back() != row) heads.row_labels.push_back(row);
    heads.cols = std::max(heads.cols, h.head + 1);
    heads.values.push_back(h.restored);
  }
  heads.rows = static_cast<int64_t>(heads.row_labels.size());
  for (int64_t h = 0; h < heads.cols; ++h) heads.col_labels.push_back(std::to_string(h));
  figures::write_heatmap(dir + "/heads.png", heads);
  figures::Heatmap res = fraction_map("restored fraction: " + r.stream, "position", "layer");
  res.col_labels = r.positions;
  res.cols = static_cast<int64_t>(r.positions.size());
  for (size_t l = 0; l < r.residual.size(); ++l) {
    res.row_labels.push_back(std::to_string(l));
    res.values.insert(res.values.end(), r.residual[l].begin(), r.residual[l].end());
  }
  res.rows = static_cast<int64_t>(r.residual.size());
  figures::write_heatmap(dir + "/residual.png", res);
  std::fprintf(stderr, "wrote %s/heads.png and %s/residual.png\n", dir.c_str(), dir.c_str());
}

}  // namespace

int cmd_patch(const PatchArgs& a) {
  const auto inf = run::open_inference(
      a.run_dir,
      {.checkpoint = a.checkpoint, .precision = a.precision, .threads = a.threads, .op = "patch"});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "patch");
  const data::Ids clean = inf->encode(a.clean, "patch: --clean");
  const data::Ids corrupt = inf->encode(a.corrupt, "patch: --corrupt");
  inspect::check_work(inspect::patch_work(*inf, static_cast<int64_t>(clean.size())), a.max_work,
                      "patch", "--max-work; use shorter inputs, or raise it");
  const inspect::Patching r = inspect::patch_activations(*inf, clean, corrupt);
  if (a.json)
    std::printf("%s\n", inspect::patch_json(r).dump(2).c_str());
  else
    print_table(r);
  if (!a.out.empty()) write_heatmaps(r, a.out);
  return 0;
}

}  // namespace qkv::app
