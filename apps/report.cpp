// qkv report RUN [RUN ...] --out report.html: what goes on the page for training runs or for
// study folders (qkv saturation, qkv layers), and the atomic write (see report.hpp for the parts).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/attention_maps.hpp"
#include "apps/commands.hpp"
#include "apps/report.hpp"
#include "core/atomic_file.hpp"
#include "core/parallel.hpp"
#include "data/tokenizer.hpp"
#include "run/family.hpp"
#include "runfolder/run_file.hpp"

namespace qkv::app {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace figures;
using namespace figures::report;

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// "saturation.json of qkv saturation, layers.json of qkv layers": what marks a study folder.
std::string study_files() {
  std::string s;
  for (const StudyKind& k : study_kinds())
    s += (s.empty() ? "" : ", ") + std::string(k.file) + " of " + k.command;
  return s;
}

std::string missing_list(const std::vector<std::string>& m) {
  std::string o;
  for (const std::string& s : m) o += "<div class=\"missing\">" + html_escape(s) + "</div>";
  return o.empty() ? "" : o;
}

// The model's parameter count, from the config and the saved vocabularies (-1: unknown).
int64_t parameter_count(const RunData& r) {
  try {
    config::ConfigDoc doc;
    doc.root = r.config;
    doc.path = (fs::path(r.dir) / "config.toml").string();
    const config::RunConfig c = config::config_from_toml(doc);
    nn::ModelConfig m = c.model;
    m.src_vocab = data::Vocab::load((fs::path(r.dir) / "src_vocab.txt").string()).size();
    m.tgt_vocab = data::Vocab::load((fs::path(r.dir) / "tgt_vocab.txt").string()).size();
    Generator g(c.seed);
    return run::family_for(c.data.task).make_model(m, g)->parameter_count();
  } catch (const Error&) {
    return -1;
  }
}

std::string summary_html(const std::vector<RunData>& runs) {
  std::vector<std::vector<std::string>> rows;
  for (const RunData& r : runs) {
    const config::ojson& d = r.config.contains("data") ? r.config["data"] : config::ojson::object();
    const int64_t params = parameter_count(r);
    rows.push_back(
        {html_escape(r.name), "<code>" + html_escape(r.dir) + "</code>",
         html_escape(d.value("task", std::string("?"))),
         std::to_string(last_step(r)) +
             (r.skipped_steps ? " (" + std::to_string(r.skipped_steps) + " skipped)" : ""),
         params < 0 ? "unknown (no vocabulary files)" : std::to_string(params),
         r.checkpoint.empty() ? "none" : html_escape(fs::path(r.checkpoint).filename().string()),
         missing_list(r.missing)});
  }
  bool any_missing = false;
  for (const RunData& r : runs) any_missing = any_missing || !r.missing.empty();
  if (!any_missing)
    for (auto& row : rows) row.pop_back();
  std::vector<std::string> header{"run",   "folder",     "task",
                                  "steps", "parameters", "newest checkpoint"};
  if (any_missing) header.push_back("missing");
  return html_table(header, rows);
}

std::string final_metrics_html(const std::vector<RunData>& runs) {
  std::vector<std::string> keys;  // every numeric key of any run's test record, in order
  for (const RunData& r : runs) {
    const config::ojson t = final_test(r);
    if (t.is_object())
      for (auto it = t.begin(); it != t.end(); ++it)
        if (it.value().is_number() && it.key() != "step" &&
            std::find(keys.begin(), keys.end(), it.key()) == keys.end())
          keys.push_back(it.key());
  }
  keys = metric_order(keys);
  if (auto e = std::find(keys.begin(), keys.end(), "examples"); e != keys.end())
    std::rotate(e, e + 1, keys.end());  // the count last
  std::vector<std::string> header{"run", "step"};
  for (const std::string& k : keys) header.push_back(html_escape(k));
  std::vector<std::vector<std::string>> rows;
  for (const RunData& r : runs) {
    const config::ojson t = final_test(r);
    if (!t.is_object()) {
      std::vector<std::string> row{html_escape(r.name),
                                   "<span class=\"missing\">no test metrics: the run has not "
                                   "finished (qkv train evaluates the test split last)</span>"};
      row.resize(header.size());
      rows.push_back(row);
      continue;
    }
    std::vector<std::string> row{html_escape(r.name), std::to_string(t.value("step", int64_t{0}))};
    for (const std::string& k : keys)
      row.push_back(t.contains(k) && t[k].is_number() ? num(t[k].get<double>()) : "");
    rows.push_back(row);
  }
  return "<p>The test split, evaluated once with the best checkpoint at the end of training.</p>" +
         html_table(header, rows, "num");
}

std::string config_html(const std::vector<RunData>& runs) {
  if (runs.size() == 1)
    return "<p>The effective config (<code>config.toml</code> of the run: every key, defaults "
           "included).</p><pre>" +
           html_escape(runs[0].config_text) + "</pre>";
  const std::vector<std::string> keys = differing_keys(runs);
  std::vector<std::string> header{"key"};
  for (const RunData& r : runs) header.push_back(html_escape(r.name));
  std::vector<std::map<std::string, std::string>> maps;
  for (const RunData& r : runs) {
    maps.emplace_back();
    for (auto& [k, v] : flatten_config(r.config)) maps.back()[k] = v;
  }
  std::vector<std::vector<std::string>> rows;
  for (const std::string& k : keys) {
    std::vector<std::string> row{"<code>" + html_escape(k) + "</code>"};
    for (const auto& m : maps) row.push_back(m.count(k) ? html_escape(m.at(k)) : "(absent)");
    rows.push_back(row);
  }
  std::string o = keys.empty() ? "<p>The configs are identical.</p>"
                               : "<p>The keys whose values differ between the runs; every other "
                                 "key is the same.</p>" +
                                     html_table(header, rows);
  for (const RunData& r : runs)
    o += "<details><summary>full config of " + html_escape(r.name) + "</summary><pre>" +
         html_escape(r.config_text) + "</pre></details>\n";
  return o;
}

// The run's inputs as text: the generated tasks' symbols, or the source sentence.
std::string source_text(const run::LoadedRun& r, int64_t i) {
  const data::Dataset& v = r.data.valid;
  if (static_cast<size_t>(i) < v.text.size()) return v.text[i].src;
  std::vector<std::string> toks;
  for (int64_t id : v.examples[i].src) toks.push_back(r.data.src_vocab.token(id));
  if (!run::is_symbol_task(r.config.data)) return data::detokenize(toks);
  std::string s;
  for (size_t k = 0; k < toks.size(); ++k) s += (k ? " " : "") + toks[k];
  return s;
}

// The map as a PNG; its title inside the image is the kind alone ("cross-attention"), the
// layer and head go in the caption, where a long title has room.
std::string heatmap_figure(Heatmap h) {
  const std::string full = h.title;
  h.title = full.substr(0, full.find(','));
  HeatmapLayout l;
  const std::vector<uint8_t> rgb = render_heatmap_rgb(h, &l);
  return image_figure(encode_png(rgb, l.width, l.height), l.width, l.height, full, full);
}

// Outputs beside references for the first validation examples of the newest checkpoint, and
// their attention maps (the last layer of each kind; every head too with --heads).
std::string attention_html(const RunData& run, const ReportArgs& a) {
  if (run.checkpoint.empty())
    return "<p class=\"missing\">No checkpoint yet: nothing to decode.</p>";
  std::string o;
  try {
    const auto inf = run::open_inference(run.dir, {.checkpoint = "latest",
                                                   .precision = std::nullopt,
                                                   .threads = a.threads > 0 ? a.threads : 0,
                                                   .op = "report"});
    const run::LoadedRun& r = inf->run();
    const int64_t n = std::min<int64_t>(a.examples, r.data.valid.size());
    o += "<p>Checkpoint <code>" + html_escape(fs::path(r.checkpoint).filename().string()) +
         "</code>, greedy decoding of the first " + std::to_string(n) +
         " validation examples; maps of the last layer of each kind, rows the queries.</p>";
    std::vector<std::vector<std::string>> rows;
    std::string maps;
    for (int64_t i = 0; i < n; ++i) {
      const data::Example& ex = r.data.valid.examples[i];
      const run::Inspection att = inf->inspect(ex.src);
      const bool same = att.output == ex.tgt;
      rows.push_back({std::to_string(i + 1), html_escape(source_text(r, i)),
                      html_escape(inf->text(ex.tgt)), html_escape(inf->text(att.output)),
                      same ? "<span class=\"ok\">yes</span>" : "<span class=\"bad\">no</span>"});
      maps += "<h4>" + html_escape(run.name) + ", example " + std::to_string(i + 1) +
              "</h4>\n<div class=\"maps\">\n";
      const int64_t longest = static_cast<int64_t>(std::max(ex.src.size(), att.tgt_out.size()));
      const int cell =
          static_cast<int>(std::clamp<int64_t>(300 / std::max<int64_t>(1, longest), 12, 28));
      for (const run::AttentionView& v : att.views) {
        maps += heatmap_figure(attention_heatmap(v, 0, "mean", cell, "report"));
        if (a.heads && v.site.heads > 1)
          for (int64_t h = 1; h <= v.site.heads; ++h)
            maps += heatmap_figure(attention_heatmap(v, 0, std::to_string(h), cell, "report"));
      }
      maps += "</div>\n";
    }
    o += html_table({"example", "source", "reference", "output", "exact"}, rows) + maps;
  } catch (const Error& e) {
    o += "<p class=\"missing\">No attention maps: " + html_escape(e.what()) + "</p>";
  }
  return o;
}

// The page's charts as they are made: each one numbered for its figure id, and kept as
// (file name, SVG) for --svg.
struct Charts {
  int64_t count = 0;
  std::vector<std::pair<std::string, std::string>> svgs;
  // The figure of one chart; name: its title, made a file name.
  std::string figure(const std::string& name, const std::string& svg, const std::string& kind) {
    std::string file;
    for (char ch : name) {
      const bool word = std::isalnum(static_cast<unsigned char>(ch)) != 0;
      if (word)
        file += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      else if (!file.empty() && file.back() != '-')
        file += '-';
    }
    while (!file.empty() && file.back() == '-') file.pop_back();
    for (const auto& [taken, unused] : svgs)
      if (taken == file + ".svg") file += "-" + std::to_string(count + 1);
    svgs.push_back({file + ".svg", svg});
    return chart_figure("chart-" + std::to_string(++count), svg, kind);
  }
};

// Line charts of every logged metric, runs overlaid.
std::string curves_html(const std::vector<RunData>& runs, Charts& charts) {
  const std::vector<MetricChart> mc = metric_charts(runs);
  if (mc.empty())
    return "<p class=\"missing\">No curves: no run has logged metrics yet "
           "(metrics.jsonl is missing or empty).</p>";
  std::string o = "<div class=\"charts\">\n";
  for (const MetricChart& m : mc)
    o += charts.figure(m.chart.title, render_svg(m.chart, kChartWidth, kChartHeight), "line");
  return o + "</div>\n";
}

// Each run's per-head curves from its probe records ([probe]), one figure per attention and
// score; empty when no run probed its heads.
std::string head_curves_html(const std::vector<RunData>& runs, Charts& charts) {
  std::vector<std::vector<figures::HeadCurves>> per_run;
  std::map<std::string, double> top;  // a figure's title -> the largest y_max over the runs
  for (const RunData& r : runs) {
    per_run.push_back(probe_head_curves(r));
    for (const figures::HeadCurves& c : per_run.back())
      top[c.title] = std::max(top[c.title], c.y_max);
  }
  std::string o;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    std::vector<figures::HeadCurves>& curves = per_run[i];
    if (curves.empty()) continue;
    // One y range per attention and score across the runs, so the runs' panels compare.
    for (figures::HeadCurves& c : curves) c.y_max = top[c.title];
    if (runs.size() > 1) o += "<h3>" + html_escape(r.name) + "</h3>\n";
    o += "<div class=\"heads\">\n";
    for (const figures::HeadCurves& c : curves)
      o += charts.figure((runs.size() > 1 ? r.name + " " : "") + c.title, figures::render_svg(c),
                         "heads");
    o += "</div>\n";
  }
  if (o.empty()) return o;
  return "<p>Every attention head's scores on the probe inputs while the model trained: layers "
         "as rows, heads as columns, the value at the last probe in each panel's corner "
         "(<code>[probe]</code> in the config; definitions in docs/inspect.md).</p>\n" +
         o;
}

std::string runs_page(const std::vector<RunData>& runs, const ReportArgs& a, Charts& charts) {
  std::vector<Section> s;
  s.push_back({"runs", "Runs", summary_html(runs)});
  s.push_back({"test", "Final test metrics", final_metrics_html(runs)});
  s.push_back({"config", runs.size() > 1 ? "Config differences" : "Config", config_html(runs)});
  s.push_back({"curves", "Curves", curves_html(runs, charts)});
  const std::string heads = head_curves_html(runs, charts);
  if (!heads.empty()) s.push_back({"heads", "Heads while training", heads});
  std::string att;
  for (const RunData& r : runs)
    att += (runs.size() > 1 ? "<h3>" + html_escape(r.name) + "</h3>\n" : "") + attention_html(r, a);
  s.push_back({"attention", "Outputs and attention maps", att});
  std::string title = "qkv report: " + runs[0].name;
  for (size_t i = 1; i < runs.size(); ++i)
    title += (i + 1 == runs.size() ? " vs " : ", ") + runs[i].name;
  const config::ojson& d =
      runs[0].config.contains("data") ? runs[0].config["data"] : config::ojson::object();
  return render_page(title,
                     html_escape(std::to_string(runs.size()) + " run(s) of the " +
                                 d.value("task", std::string("?")) + " task"),
                     s, charts.count);
}

// A study folder kind's page (figures/report_study.hpp): its settings, its results table when it
// has one, its charts.
std::string study_page(const StudyKind& kind, const std::vector<StudyFolder>& folders,
                       Charts& charts) {
  const StudyPage p = kind.page(folders);
  std::string figs = "<div class=\"charts\">\n";
  for (const LineChart& c : p.lines)
    figs += charts.figure(c.title, render_svg(c, kChartWidth, kChartHeight), "line");
  for (const BarChart& b : p.bars)
    figs += charts.figure(b.title, render_svg(b, kChartWidth, kChartHeight), "bars");
  figs += "</div>\n";
  std::vector<Section> s;
  s.push_back({"settings", "Settings", p.intro + html_table(p.settings_header, p.settings_rows)});
  if (!p.results_rows.empty())
    s.push_back({"results", "Results", html_table(p.results_header, p.results_rows)});
  s.push_back({"charts", "Charts", figs});
  return render_page(p.title, p.subtitle, s, charts.count);
}

}  // namespace

RunData read_run(const std::string& dir) {
  const fs::path p(dir);
  if (!fs::is_directory(p)) throw Error("report: " + dir + ": no such folder");
  if (!fs::exists(p / "config.toml"))
    throw Error("report: " + dir +
                ": not a run folder (no config.toml) nor a study folder (none of " + study_files() +
                ")");
  RunData r;
  r.dir = dir;
  fs::path named = p;
  if (named.filename().empty()) named = named.parent_path();  // "runs/a/"
  r.name = named.filename().string();
  if (r.name.empty() || r.name == ".") r.name = fs::absolute(p).lexically_normal().filename();
  r.config_text = run::read_run_file((p / "config.toml").string(), "config file", 16ull << 20);
  r.config = config::parse_config(r.config_text, (p / "config.toml").string()).root;
  read_metrics((p / "metrics.jsonl").string(), r);
  r.checkpoint = run::find_checkpoint(dir, "latest");
  if (r.checkpoint.empty())
    r.missing.push_back("no checkpoint yet: no attention maps or example outputs");
  return r;
}

int cmd_report(const ReportArgs& a) {
  QKV_CHECK(!a.runs.empty(), "report",
            "give at least one run folder (or a study folder: ", study_files(), ")");
  QKV_CHECK(a.examples >= 0, "report", "--examples must be >= 0, got ", a.examples);
  const fs::path out(a.out);
  QKV_CHECK(!a.out.empty() && !fs::is_directory(out), "report", "--out must name a file, got '",
            a.out, "'");
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  QKV_CHECK(fs::is_directory(parent), "report", "--out ", a.out, ": folder ", parent.string(),
            " does not exist");
  QKV_CHECK(a.svg_dir.empty() || !fs::exists(a.svg_dir) || fs::is_directory(a.svg_dir), "report",
            "--svg ", a.svg_dir, " is a file, not a folder");
  std::vector<RunData> runs;
  std::vector<StudyFolder> studies;
  const StudyKind* kind = nullptr;  // of the study folders, which share one
  for (const std::string& dir : a.runs) {
    const StudyKind* k = study_kind_of(dir);
    if (!k) {
      runs.push_back(read_run(dir));
      continue;
    }
    QKV_CHECK(!kind || kind == k, "report", kind ? kind->command : "", " and ", k->command,
              " folders cannot share a page (", studies.empty() ? "" : studies[0].dir, ", ", dir,
              "); report them apart");
    kind = k;
    studies.push_back(read_study(dir, *k));
  }
  QKV_CHECK(runs.empty() || studies.empty(), "report", "training runs and ",
            kind ? kind->command : "", " folders cannot share a page (", runs[0].dir, " is a run, ",
            studies.empty() ? "" : studies[0].dir, " a ",
            kind ? std::string(kind->command).substr(4) : "", " folder); report them apart");
  // Labels must tell runs apart: "a/run" and "b/run" become "a/run" and "b/run".
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t k = 0; k < runs.size(); ++k)
      if (i != k && runs[i].name == runs[k].name) {
        runs[i].name = fs::path(runs[i].dir).lexically_normal().string();
        break;
      }
  check_same_task(runs);

  Charts charts;
  const std::string html =
      studies.empty() ? runs_page(runs, a, charts) : study_page(*kind, studies, charts);
  atomic_write_file(a.out, html);
  if (!a.svg_dir.empty()) {
    fs::create_directories(a.svg_dir);
    for (const auto& [file, svg] : charts.svgs)
      atomic_write_file((fs::path(a.svg_dir) / file).string(), svg);
  }
  for (const RunData& r : runs)
    for (const std::string& m : r.missing)
      std::fprintf(stderr, "qkv report: %s: %s\n", r.dir.c_str(), m.c_str());
  std::printf("wrote %s: %lld chart(s), %.0f KB\n", a.out.c_str(),
              static_cast<long long>(charts.count), static_cast<double>(html.size()) / 1024);
  return 0;
}

}  // namespace qkv::app
