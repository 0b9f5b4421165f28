// qkv report for `qkv layers --out DIR` folders (report_study.hpp): the lesson's table with the
// measured columns and the two figures qkv layers writes, rebuilt from layers.json so several
// folders (say two hosts, or two widths) can be overlaid on one page.
#include <string>

#include "figures/layer_study.hpp"
#include "figures/length_study.hpp"
#include "figures/report.hpp"

namespace qkv::figures::report {

using nlohmann::json;

namespace {

bool numbers(const json& a, size_t size) {
  if (!a.is_array() || a.size() != size) return false;
  for (const json& v : a)
    if (!v.is_number()) return false;
  return true;
}

bool valid_layer(const json& l) {
  if (!l.is_object() || !l.contains("layer") || !l["layer"].is_string() || !l.contains("n") ||
      !l["n"].is_array() || l["n"].empty() || !l.contains("lesson") || !l["lesson"].is_object())
    return false;
  const size_t n = l["n"].size();
  for (const char* key : {"n", "seconds", "flops_forward", "sequential_steps"})
    if (!l.contains(key) || !numbers(l[key], n)) return false;
  return l.contains("profile") && l["profile"].is_array() &&
         numbers(l["profile"], l["profile"].size()) && l.contains("exponent") &&
         l["exponent"].is_number() && l.contains("reach") && l["reach"].is_number();
}

std::string cell(const json& v) {
  return html_escape(v.is_string() ? v.get<std::string>() : v.dump());
}

std::string num(double v) { return html_escape(general(v)); }

// The length study's record of one (model, task).
bool valid_curve(const json& c) {
  if (!c.is_object() || !c.contains("model") || !c["model"].is_string() || !c.contains("task") ||
      !c["task"].is_string() || !c.contains("n") || !c["n"].is_array())
    return false;
  const size_t n = c["n"].size();
  for (const char* key : {"n", "exact_match"})
    if (!c.contains(key) || !numbers(c[key], n)) return false;
  for (const char* key : {"profile_init", "profile_trained"})
    if (!c.contains(key) || !c[key].is_array() || !numbers(c[key], c[key].size())) return false;
  return true;
}

// Optional: a folder written with --train-steps 0 has none.
bool valid_training(const json& j) {
  if (!j.contains("training")) return true;
  const json& t = j["training"];
  if (!t.is_object() || !t.contains("settings") || !t["settings"].is_object() ||
      !t.contains("curves") || !t["curves"].is_array())
    return false;
  for (const json& c : t["curves"])
    if (!valid_curve(c)) return false;
  return true;
}

// Every folder's exact-match and trained-path charts, the first folder's titles; series of the
// same task on one chart.
std::vector<LineChart> length_lines(const std::vector<StudyFolder>& folders, bool several) {
  std::vector<LineChart> exact;
  LineChart path;
  bool any = false;
  for (const StudyFolder& f : folders) {
    if (!f.j.contains("training")) continue;
    const LengthCharts c = length_charts(f.j["training"], several ? f.name + ": " : "");
    if (!any)
      exact = c.exact, path = c.path, any = true;
    else {
      for (size_t k = 0; k < c.exact.size() && k < exact.size(); ++k)
        for (const Series& s : c.exact[k].series) exact[k].series.push_back(s);
      for (const Series& s : c.path.series) path.series.push_back(s);
    }
  }
  if (any) exact.push_back(path);
  return exact;
}

}  // namespace

bool valid_layers(const json& j) {
  if (!j.is_object() || !j.contains("settings") || !j["settings"].is_object() ||
      !j.contains("layers") || !j["layers"].is_array() || j["layers"].empty())
    return false;
  for (const json& l : j["layers"])
    if (!valid_layer(l)) return false;
  return valid_training(j);
}

StudyPage layers_page(const std::vector<StudyFolder>& folders) {
  StudyPage p;
  p.title = "qkv report: layers";
  for (const StudyFolder& f : folders) p.title += " " + f.name;
  p.subtitle = "recurrence vs. convolution vs. self-attention, measured";
  p.intro =
      "<p>Results of <code>qkv layers</code>: one layer of each kind at equal width, forward + "
      "backward timed over sequence lengths n, FLOPs counted by formula, sequential steps as the "
      "computation graph has them, and the gradient norm of the last position's output with "
      "respect to every input position at initialisation (the path length made visible). Then, "
      "when "
      "it trained them, each kind of encoder trained on copy and reverse with the same budget of "
      "steps: exact match against length, past the training lengths too, and the encoder's "
      "gradient profile before and after training.</p>";
  p.settings_header = {"folder", "path", "d", "batch", "heads", "kernel", "n", "repeats", "seed"};
  const bool several = folders.size() > 1;
  p.results_header = {"folder",   "layer",      "lesson: cost", "steps",
                      "path",     "n",          "FLOPs fwd",    "time fwd+bwd (s)",
                      "exponent", "seq. steps", "reach"};
  for (const StudyFolder& f : folders) {
    const json& st = f.j["settings"];
    p.settings_rows.push_back({html_escape(f.name), "<code>" + html_escape(f.dir) + "</code>",
                               cell(st.value("d", json())), cell(st.value("batch", json())),
                               cell(st.value("heads", json())), cell(st.value("kernel", json())),
                               cell(st.value("lengths", json())), cell(st.value("repeats", json())),
                               cell(st.value("seed", json()))});
    for (const json& l : f.j["layers"]) {
      const json& lesson = l["lesson"];
      p.results_rows.push_back(
          {html_escape(f.name), cell(l["layer"]), cell(lesson.value("cost", json(""))),
           cell(lesson.value("steps", json(""))), cell(lesson.value("path", json(""))),
           cell(l["n"].back()), num(l["flops_forward"].back().get<double>()),
           num(l["seconds"].back().get<double>()), num(l["exponent"].get<double>()),
           cell(l["sequential_steps"].back()), cell(l["reach"])});
    }
  }
  // The first folder's titles; every folder's series, labelled by folder when there are several.
  LayerCharts all = layer_charts(folders.front().j, several ? folders.front().name + ": " : "");
  for (size_t i = 1; i < folders.size(); ++i) {
    LayerCharts c = layer_charts(folders[i].j, folders[i].name + ": ");
    for (Series& s : c.time.series) all.time.series.push_back(std::move(s));
    for (Series& s : c.path.series) all.path.series.push_back(std::move(s));
  }
  p.lines = {all.time, all.path};
  for (LineChart& c : length_lines(folders, several)) p.lines.push_back(std::move(c));
  return p;
}

}  // namespace qkv::figures::report
