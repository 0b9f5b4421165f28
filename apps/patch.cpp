// qkv patch RUN --clean "..." --corrupt "...": activation patching over every head's output
// and every (layer, position) of the residual stream (inspect/patch.hpp), as tables, --json,
// and with --out DIR two heatmaps. --approx: attribution patching's estimates of the same
// cells and of every head at each position (inspect/attribution_patching.hpp), with --check K
// the K largest patched exactly beside them. --path SENDER: path patching of those heads along
// each direct path (inspect/path_patching.hpp), a receiver x input table per sender and the top
// paths.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "apps/commands.hpp"
#include "core/error.hpp"
#include "figures/heatmap.hpp"
#include "inspect/attribution_patching.hpp"
#include "inspect/heads.hpp"
#include "inspect/patch.hpp"
#include "inspect/path_patching.hpp"
#include "inspect/work.hpp"
#include "run/inference.hpp"

namespace qkv::app {

namespace {

void print_answers(const inspect::Patching& r) {
  std::printf(
      "clean answer '%s', corrupted answer '%s'; logit difference %.4f clean, %.4f "
      "corrupted\n\n",
      r.clean_answer.c_str(), r.corrupt_answer.c_str(), r.clean_diff, r.corrupt_diff);
}

// what: "restored fraction", "estimated restored fraction"
void print_residual(const inspect::Patching& r, const char* what) {
  std::printf("\n%s, patching %s at one position:\n%-6s", what, r.stream.c_str(), "L");
  for (const auto& p : r.positions) std::printf(" %8.8s", p.c_str());
  std::printf("\n");
  for (size_t l = 0; l < r.residual.size(); ++l) {
    std::printf("%-6zu", l);
    for (const double v : r.residual[l]) std::printf(" %8.4f", v);
    std::printf("\n");
  }
}

void print_table(const inspect::Patching& r) {
  print_answers(r);
  std::printf("restored fraction, patching each head's output:\n");
  for (const auto& h : r.heads) std::printf("  %-14s %8.4f\n", h.name.c_str(), h.restored);
  print_residual(r, "restored fraction");
}

void print_check(const inspect::AttributionPatching& r) {
  std::printf("\nthe %zu largest estimates patched exactly:\n  %-26s %-8s %9s %9s %9s\n",
              r.checked.size(), "cell", "position", "estimate", "exact", "error");
  for (const auto& c : r.checked) {
    const std::string at = std::to_string(c.position) + " " + c.label;
    std::printf("  %-26s %-8.8s %9.4f %9.4f %9.4f\n", c.name.c_str(), at.c_str(), c.estimate,
                c.exact, c.estimate - c.exact);
  }
  if (std::isnan(r.correlation))
    std::printf(
        "correlation of estimate and exact: undefined (fewer than 2 cells, or one "
        "column constant)\n");
  else
    std::printf("correlation of estimate and exact over these %zu: %.4f\n", r.checked.size(),
                r.correlation);
}

void print_approx(const inspect::AttributionPatching& r) {
  const inspect::Patching& e = r.estimate;
  print_answers(e);
  std::printf(
      "estimated restored fraction (attribution patching: (clean - corrupted) . gradient of the "
      "corrupted run), each head's output in all and at each query position:\n");
  for (size_t i = 0; i < e.heads.size(); ++i) {
    std::printf("  %-14s %8.4f |", e.heads[i].name.c_str(), e.heads[i].restored);
    for (size_t p = 0; p < r.heads[i].by_position.size(); ++p)
      std::printf(" %s %.4f", r.heads[i].positions[p].c_str(), r.heads[i].by_position[p]);
    std::printf("\n");
  }
  print_residual(e, "estimated restored fraction");
  if (!r.checked.empty()) print_check(r);
}

figures::Heatmap fraction_map(std::string title, std::string x, std::string y) {
  figures::Heatmap hm;
  hm.title = std::move(title), hm.x_label = std::move(x), hm.y_label = std::move(y);
  hm.vmin = 0, hm.vmax = 1;
  return hm;
}

// what: "restored fraction", "estimated restored fraction"
void write_heatmaps(const inspect::Patching& r, const std::string& dir, const std::string& what) {
  std::filesystem::create_directories(dir);
  figures::Heatmap heads = fraction_map(what + ": head outputs", "head", "attention.layer");
  for (const auto& h : r.heads) {
    const std::string row = h.name.substr(0, h.name.rfind('.'));
    if (heads.row_labels.empty() || heads.row_labels.back() != row) heads.row_labels.push_back(row);
    heads.cols = std::max(heads.cols, h.head + 1);
    heads.values.push_back(h.restored);
  }
  heads.rows = static_cast<int64_t>(heads.row_labels.size());
  for (int64_t h = 0; h < heads.cols; ++h) heads.col_labels.push_back(std::to_string(h));
  figures::write_heatmap(dir + "/heads.png", heads);
  figures::Heatmap res = fraction_map(what + ": " + r.stream, "position", "layer");
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

// --approx, and --check K with it
int approx_patch(const PatchArgs& a, const run::Inference& inf, const data::Ids& clean,
                 const data::Ids& corrupt) {
  QKV_CHECK(a.approx, "patch",
            "--check needs --approx (it patches the largest estimates exactly beside them)");
  QKV_CHECK(a.check == -1 || (a.check >= 1 && a.check <= inspect::kMaxPatchCheck), "patch",
            "--check must be 1..", inspect::kMaxPatchCheck, ", got ", a.check);
  const int64_t check = std::max<int64_t>(a.check, 0);
  inspect::check_work(
      inspect::attribution_patching_work(inf, static_cast<int64_t>(clean.size()), check),
      a.max_work, "patch", "--max-work; use shorter inputs, a smaller --check, or raise it");
  const inspect::AttributionPatching r = inspect::attribution_patching(inf, clean, corrupt, check);
  if (a.json)
    std::printf("%s\n", inspect::attribution_patching_json(r).dump(2).c_str());
  else
    print_approx(r);
  if (!a.out.empty()) write_heatmaps(r.estimate, a.out, "estimated restored fraction");
  return 0;
}

// A receiver's row: q, k, v columns for a head ("-" where it is no path), one value otherwise.
void print_paths(const inspect::PathPatching& s) {
  const inspect::HeadRef& h = s.paths.sender;
  std::printf(
      "sender %s (%s, layer %lld head %lld): patching its output restores %.4f, all its direct "
      "paths at once %.4f\n",
      h.name().c_str(), h.attention.title.c_str(), static_cast<long long>(h.layer),
      static_cast<long long>(h.head), s.activation, s.all_paths);
  std::printf("restored fraction along each direct path alone:\n  %-14s %9s %9s %9s\n", "receiver",
              "q", "k", "v");
  const auto& rs = s.paths.receivers;
  for (size_t i = 0; i < rs.size();) {
    if (rs[i].head < 0) {
      std::printf("  %-14s %9.4f  (its input)\n", rs[i].name.c_str(), rs[i].restored);
      ++i;
      continue;
    }
    std::string cols[3] = {"-", "-", "-"};
    const std::string name = rs[i].name;
    for (; i < rs.size() && rs[i].name == name; ++i)
      cols[rs[i].input == "q"   ? 0
           : rs[i].input == "k" ? 1
                                : 2] = fmt::format("{:.4f}", rs[i].restored);
    std::printf("  %-14s %9s %9s %9s\n", name.c_str(), cols[0].c_str(), cols[1].c_str(),
                cols[2].c_str());
  }
  std::vector<const inspect::PathReceiver*> top;
  for (const auto& r : rs) top.push_back(&r);
  std::stable_sort(top.begin(), top.end(), [](const auto* a, const auto* b) {
    return std::abs(a->restored) > std::abs(b->restored);
  });
  top.resize(std::min<size_t>(top.size(), 5));
  std::printf("top paths:\n");
  for (const auto* r : top) {
    const std::string to = r->head < 0 ? r->name : r->name + " " + r->input;
    std::printf("  %s -> %-16s %9.4f\n", h.name().c_str(), to.c_str(), r->restored);
  }
}

// --path SENDERS
int path_patch(const PatchArgs& a, const run::Inference& inf, const data::Ids& clean,
               const data::Ids& corrupt) {
  QKV_CHECK(!a.approx && a.check == -1, "patch",
            "--path and --approx are two methods: ask one at a time");
  QKV_CHECK(a.out.empty(), "patch",
            "--out draws activation patching's heatmaps; --path prints "
            "its tables (or --json)");
  inspect::check_work(inspect::path_patching_work(inf, static_cast<int64_t>(clean.size()),
                                                  inspect::path_senders(inf, *a.path, "patch")),
                      a.max_work, "patch",
                      "--max-work; use shorter inputs, fewer senders, or raise it");
  const inspect::PathPatchingResult r = inspect::path_patching(inf, clean, corrupt, *a.path);
  if (a.json) {
    std::printf("%s\n", inspect::path_patching_json(r).dump(2).c_str());
    return 0;
  }
  std::printf(
      "clean answer '%s', corrupted answer '%s'; logit difference %.4f clean, %.4f "
      "corrupted\n",
      r.clean_answer.c_str(), r.corrupt_answer.c_str(), r.clean_diff, r.corrupt_diff);
  for (const auto& s : r.senders) {
    std::printf("\n");
    print_paths(s);
  }
  return 0;
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
  if (a.path) return path_patch(a, *inf, clean, corrupt);
  if (a.approx || a.check != -1) return approx_patch(a, *inf, clean, corrupt);
  inspect::check_work(inspect::patch_work(*inf, static_cast<int64_t>(clean.size())), a.max_work,
                      "patch", "--max-work; use shorter inputs, or raise it");
  const inspect::Patching r = inspect::patch_activations(*inf, clean, corrupt);
  if (a.json)
    std::printf("%s\n", inspect::patch_json(r).dump(2).c_str());
  else
    print_table(r);
  if (!a.out.empty()) write_heatmaps(r, a.out, "restored fraction");
  return 0;
}

}  // namespace qkv::app
