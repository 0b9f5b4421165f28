// qkv report: one self-contained HTML page (inline SVG charts, PNG heatmaps as data: URIs, no
// script, no network) for a run folder, a comparison of runs, or study folders (`qkv saturation`,
// `qkv layers`: report_study.hpp).
//
// The parts, so tests can check each alone:
//   report_data.cpp  reads metrics.jsonl; finds every metric a run
//                    logged in metrics.jsonl (any numeric key, nested objects and per-layer
//                    arrays too) and turns them into charts, runs overlaid
//   report_html.cpp  the page: escaping, base64, tables, figures, sections, the one <title>
//   apps/report.cpp  `qkv report`: reads run folders (their config and checkpoint), what to
//                    draw for runs or study folders, attention maps of validation
//                    examples, the atomic write
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "figures/head_curves.hpp"
#include "figures/plot.hpp"
#include "figures/report_study.hpp"

namespace qkv::figures::report {

using ojson = nlohmann::ordered_json;

// --- report_data.cpp ---

// One run folder as found on disk; what is missing is said in `missing`, never thrown.
struct RunData {
  std::string dir;   // as given
  std::string name;  // short label: the folder's name (made unique by report.cpp)
  std::string config_text;
  ojson config;                      // config.toml, parsed
  std::vector<ojson> records;        // metrics.jsonl, in order (unparsable lines skipped)
  int64_t bad_lines = 0;             // unparsable metrics.jsonl lines (a crash mid-write)
  int64_t skipped_steps = 0;         // {"skipped": true} records (train.skip_nonfinite)
  std::string checkpoint;            // the newest checkpoint folder, "" when none
  std::vector<std::string> missing;  // one sentence each: "no metrics yet (...)"
};

// Reads a run's metrics.jsonl at path into r.records (counting bad lines and skipped steps);
// what is missing or unreadable goes to r.missing.
void read_metrics(const std::string& path, RunData& r);

// The config flattened: "model.d_model" -> "64", "data.task" -> "\"copy\"" (TOML spelling).
std::vector<std::pair<std::string, std::string>> flatten_config(const ojson& root);

// The keys whose values differ between the configs (absent counts as a value), in the order
// they first appear.
std::vector<std::string> differing_keys(const std::vector<RunData>& runs);

// What the runs learn: data.task, with data.path for file tasks. Runs of different tasks
// cannot be compared: throws qkv::Error naming two that differ.
void check_same_task(const std::vector<RunData>& runs);

// The last {"split": "test"} record of the run, or null.
ojson final_test(const RunData& r);
// Metric names with the known ones first, in the order of the charts (loss, token accuracy,
// exact match, BLEU, chrF...), the rest as given.
std::vector<std::string> metric_order(std::vector<std::string> keys);
// The largest training step logged (0 when none).
int64_t last_step(const RunData& r);

// A chart of one metric, every run's series overlaid.
struct MetricChart {
  std::string key;  // "train/loss", "valid/exact_match", "train/attention_entropy.encoder_self"
  LineChart chart;
};
// Every numeric metric in the runs' records, discovered from the keys (nothing hard-coded but
// the names and units of the known ones): one chart per (split, key), a per-layer array gives
// one series per layer. Ordered: losses, learning rate, gradient norm, validation metrics,
// attention entropy, the rest. Test records are left out (they are the final metrics table).
std::vector<MetricChart> metric_charts(const std::vector<RunData>& runs);

// The per-head curves of a run's probe records (metrics.jsonl lines {"step", "probe":
// {"attentions": {name: {"layers", "heads", score: [[per head] per layer]...}}, "icl"}}): one
// figure per attention and score, in the records' order, titled, labelled and ranged by the
// score registry (interp/head_scores.hpp): a share of attention 0..1, nats 0..the largest
// value. A record whose layout differs from the first is left out.
std::vector<HeadCurves> probe_head_curves(const RunData& r);

// --- report_html.cpp ---

std::string html_escape(const std::string& s);
std::string base64(const std::string& bytes);

// A table: header cells and rows of cells, each cell already HTML (escape text first).
std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::string& css_class = "");

// A chart as a figure: <figure class="chart" id=... data-kind="line|bars"> with the inline SVG.
std::string chart_figure(const std::string& id, const std::string& svg, const std::string& kind);
// A PNG as a figure with a data: URI.
std::string image_figure(const std::string& png, int width, int height, const std::string& alt,
                         const std::string& caption);

struct Section {
  std::string id, heading, html;
};
// The page: one <title>, a contents list linking every section, the sections in order.
// charts: how many chart figures the page holds (written as data-charts on <main>, so a
// checker can tell whether all of them arrived).
std::string render_page(const std::string& title, const std::string& subtitle,
                        const std::vector<Section>& sections, int64_t charts);

// Chart size on the page (pixels; two per row at 1280 px).
constexpr int kChartWidth = 600, kChartHeight = 340;

}  // namespace qkv::figures::report
