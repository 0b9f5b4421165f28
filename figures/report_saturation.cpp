// qkv report for `qkv saturation --out DIR` folders (report_study.hpp): the same charts qkv
// saturation writes as SVG files, rebuilt from saturation.json so several folders can be
// overlaid on one page.
#include <cmath>
#include <string>

#include "figures/report.hpp"

namespace qkv::figures::report {

using nlohmann::json;

namespace {

const char* kScaled = "1/sqrt(d_k)";

std::string scale_label(const std::string& scale) {
  return scale == kScaled ? "scale 1/sqrt(d_k)" : "scale " + scale + " (unscaled)";
}

// One series per (folder, scale) of records[field] against d_k.
std::vector<Series> by_scale(const std::vector<StudyFolder>& s, const std::string& field,
                             const std::string& prefix = "") {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  std::vector<Series> out;
  for (size_t f = 0; f < s.size(); ++f)
    for (const char* scale : {kScaled, "1"}) {
      Series ser;
      ser.label = (s.size() > 1 ? s[f].name + ": " : "") + prefix + scale_label(scale);
      for (const json& r : s[f].j["records"])
        if (r.value("scale", std::string()) == scale && r.contains(field) && r[field].is_number()) {
          ser.x.push_back(r["d_k"].get<double>());
          ser.y.push_back(r[field].get<double>());
        }
      if (ser.x.empty()) continue;
      ser.color = kColors[out.size() % 8];
      out.push_back(std::move(ser));
    }
  return out;
}

std::string at_init(const std::vector<StudyFolder>& s) {
  const int64_t keys = s[0].j["settings"].value("keys", int64_t{0});
  return std::to_string(keys) + " keys, q and k ~ N(0, 1)";
}

std::vector<LineChart> saturation_charts(const std::vector<StudyFolder>& s) {
  std::vector<LineChart> c;
  if (s.empty()) return c;
  const std::string init = at_init(s);
  c.push_back({"Variance of the attention logits, " + init, "d_k", "var(scale * q.k), log scale",
               true, true, by_scale(s, "var_qk")});
  LineChart ent{"Mean row entropy of softmax(scale q.k), " + init,
                "d_k",
                "entropy (nats)",
                true,
                false,
                by_scale(s, "mean_entropy")};
  Series maxh{"log m (uniform weights)", {}, {}, "#777777"};
  for (const json& r : s[0].j["records"])
    if (r.value("scale", std::string()) == kScaled)
      maxh.x.push_back(r["d_k"].get<double>()), maxh.y.push_back(r["max_entropy"].get<double>());
  ent.series.push_back(maxh);
  c.push_back(ent);
  c.push_back({"Mean largest attention weight, " + init, "d_k", "max_j p_j", true, false,
               by_scale(s, "mean_max_weight")});
  c.push_back({"Rows whose largest weight exceeds 0.99, " + init, "d_k", "fraction of rows", true,
               false, by_scale(s, "saturated_fraction")});
  c.push_back({"Softmax Jacobian norm, " + init, "d_k", "mean ||diag(p) - p p^T||_F", true, false,
               by_scale(s, "jacobian_norm")});
  std::vector<Series> g = by_scale(s, "grad_norm_wq", "W_Q, ");
  for (Series& k : by_scale(s, "grad_norm_wk", "W_K, ")) g.push_back(k);
  for (size_t i = 0; i < g.size(); ++i) g[i].color = "";
  c.push_back({"Gradient norm reaching W_Q and W_K (one-head attention)", "d_k = d_model",
               "||dL/dW|| (Frobenius), log scale", true, true, g});
  c.push_back({"Gradient reaching the attention logits (softmax input)", "d_k = d_model",
               "||dL/d logits|| (Frobenius), log scale", true, true,
               by_scale(s, "grad_norm_logits")});

  // Training curves of the copy task, when the folder has them.
  LineChart loss{"Copy task: training loss, scaled against unscaled",
                 "step (optimizer updates)",
                 "cross-entropy (nats / token)",
                 false,
                 false,
                 {}};
  LineChart att{"Copy task: mean attention entropy during training",
                "step (optimizer updates)",
                "entropy (nats), mean over layers and rows",
                false,
                false,
                {}};
  for (const StudyFolder& f : s)
    for (const json& t : f.j.value("training", json::array())) {
      const std::string label =
          (s.size() > 1 ? f.name + ": " : "") + scale_label(t.value("scale", std::string()));
      Series l{label, {}, {}, ""}, e{label, {}, {}, ""};
      for (const json& st : t["step"]) l.x.push_back(st.get<double>());
      e.x = l.x;
      for (const json& v : t["loss"]) l.y.push_back(v.is_number() ? v.get<double>() : NAN);
      for (const json& v : t["attention_entropy"])
        e.y.push_back(v.is_number() ? v.get<double>() : NAN);
      loss.series.push_back(l), att.series.push_back(e);
    }
  if (!loss.series.empty()) {
    loss.log_y = spans_decades(loss.series);
    if (loss.log_y) loss.y_label += ", log scale";
    c.push_back(loss);
    c.push_back(att);
  }
  return c;
}

std::vector<BarChart> saturation_bars(const std::vector<StudyFolder>& s) {
  std::vector<BarChart> out;
  for (const StudyFolder& f : s) {
    const json& row = f.j.value("example_row", json::object());
    if (!row.contains("scaled") || !row.contains("unscaled")) continue;
    BarChart b;
    b.title = (s.size() > 1 ? f.name + ": " : "") + "One row of attention weights at d_k = " +
              std::to_string(row.value("d_k", int64_t{0}));
    b.x_label = "key";
    b.y_label = "attention weight";
    Series sc{"scale 1/sqrt(d_k)", {}, {}, ""}, un{"scale 1 (unscaled)", {}, {}, ""};
    for (const json& v : row["scaled"]) sc.y.push_back(v.get<double>());
    for (const json& v : row["unscaled"]) un.y.push_back(v.get<double>());
    for (size_t k = 0; k < sc.y.size(); ++k) b.categories.push_back(std::to_string(k + 1));
    b.series = {sc, un};
    out.push_back(b);
  }
  return out;
}

}  // namespace

bool valid_saturation(const json& j) {
  return j.is_object() && j.contains("records") && j["records"].is_array() &&
         j.contains("settings") && j["settings"].is_object();
}

StudyPage saturation_page(const std::vector<StudyFolder>& sat) {
  StudyPage p;
  p.title = "qkv report: saturation";
  for (const StudyFolder& f : sat) p.title += " " + f.name;
  p.subtitle = "why attention scales q.k by 1/sqrt(d_k)";
  p.intro =
      "<p>Results of <code>qkv saturation</code>: attention logits q.k of random unit-variance "
      "vectors, softmax rows and gradients at scale 1/sqrt(d_k) and at scale 1.</p>";
  p.settings_header = {"folder", "path", "d_k", "keys (m)", "rows per d_k", "seed", "training"};
  for (const StudyFolder& f : sat) {
    const json& st = f.j["settings"];
    std::string dks;
    for (const json& d : st.value("d_k", json::array()))
      dks += (dks.empty() ? "" : ", ") + d.dump();
    std::string training = "none";
    for (const json& t : f.j.value("training", json::array()))
      training = "copy task, d_model " + t.value("d_model", json(0)).dump() + ", " +
                 t.value("heads", json(0)).dump() + " head(s), " +
                 t.value("steps", json(0)).dump() + " steps per scale";
    p.settings_rows.push_back({html_escape(f.name), "<code>" + html_escape(f.dir) + "</code>",
                               html_escape(dks), st.value("keys", json(0)).dump(),
                               st.value("rows", json(0)).dump(), st.value("seed", json(0)).dump(),
                               html_escape(training)});
  }
  p.lines = saturation_charts(sat);
  p.bars = saturation_bars(sat);
  return p;
}

}  // namespace qkv::figures::report
