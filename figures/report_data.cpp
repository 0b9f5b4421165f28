// qkv report, the data side: run folders and metrics.jsonl in, charts out (see report.hpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/bounded_json.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/task_kind.hpp"
#include "figures/report.hpp"
#include "interp/head_scores.hpp"

namespace qkv::figures::report {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

// Ten distinguishable colours (the "tab10" set): a run keeps its colour across charts.
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// Names and units of the metrics qkv train logs; any other key is drawn under its own name.
struct Known {
  const char* key;
  const char* name;
  const char* unit;
  bool log_ok = true;  // log scale when the values span decades (not for rates and fractions)
};
const Known kKnown[] = {
    {"loss", "loss", "cross-entropy (nats/token)"},
    {"lr", "learning rate", "learning rate (per step)", false},
    {"grad_norm", "gradient norm", "L2 norm (before clipping)"},
    {"token_accuracy", "token accuracy", "fraction of target tokens", false},
    {"exact_match", "exact match", "fraction of examples", false},
    {"bleu", "BLEU", "BLEU score"},
    {"chrf", "chrF", "chrF score"},
    {"attention_entropy.encoder_self", "attention entropy, encoder self-attention",
     "entropy (nats)", false},
    {"attention_entropy.decoder_self", "attention entropy, decoder self-attention",
     "entropy (nats)", false},
    {"attention_entropy.decoder_cross", "attention entropy, cross-attention", "entropy (nats)",
     false},
    {"icl", "in-context learning score", "late minus early token loss (nats)", false},
};

const Known* known(const std::string& key) {
  for (const Known& k : kKnown)
    if (key == k.key) return &k;
  return nullptr;
}

// The known metrics in the table's order, then the others (metrics.jsonl's keys are sorted).
size_t known_order(const std::string& key) {
  const Known* k = known(key);
  return k ? static_cast<size_t>(k - kKnown) : std::size(kKnown);
}

std::string split_word(const std::string& split) {
  if (split == "train") return "Training";
  if (split == "valid") return "Validation";
  return split;  // another split name, as logged
}

// Where a chart goes: losses first, then the optimizer, validation metrics, attention, rest.
int rank_of(const std::string& split, const std::string& key) {
  if (key == "loss") return split == "train" ? 0 : 1;
  if (split == "train" && key == "lr") return 2;
  if (split == "train" && key == "grad_norm") return 3;
  if (split == "valid") return 4;
  if (key.rfind("attention_entropy", 0) == 0) return 5;
  if (split == "probe") return 6;
  return 7;
}

// Series of one chart, by (run, sub-label) in the order they appear.
struct Pending {
  std::string split, key;
  std::vector<std::pair<std::pair<size_t, std::string>, Series>> series;
  Series& at(size_t run, const std::string& sub) {
    for (auto& [id, s] : series)
      if (id.first == run && id.second == sub) return s;
    series.push_back({{run, sub}, Series{}});
    return series.back().second;
  }
};

// Colour hex ("#1f77b4") mixed with white: the k-th of n shades, the first the colour itself.
std::string shade(const std::string& hex, size_t k, size_t n) {
  if (n <= 1 || k == 0) return hex;
  const double f = 0.55 * static_cast<double>(k) / static_cast<double>(n - 1);
  std::string o = "#";
  for (int c = 0; c < 3; ++c) {
    const int v = std::stoi(hex.substr(1 + 2 * c, 2), nullptr, 16);
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<int>(v + (255 - v) * f + 0.5));
    o += b;
  }
  return o;
}

// A record's probe.attentions object, or null when it has none (not a probe record).
const json* probe_attentions(const json& rec) {
  const auto probe = rec.find("probe");
  if (probe == rec.end() || !probe->is_object()) return nullptr;
  const auto atts = probe->find("attentions");
  return atts != probe->end() && atts->is_object() ? &*atts : nullptr;
}

// An attention of a probe record: its name (the key in "attentions") and its title.
struct ProbeSite {
  std::string name, title;
};

// A probe record's attentions in the model's order, titled as the model titles them (the
// record's "sites", inspect/probe_hook.hpp); a record without them (an older version's) lists
// its attentions by name, each titled by its name.
std::vector<ProbeSite> probe_sites(const json& rec) {
  std::vector<ProbeSite> out;
  const json* atts = probe_attentions(rec);
  if (!atts) return out;
  const json& sites = rec["probe"].contains("sites") ? rec["probe"]["sites"] : json();
  if (sites.is_array())
    for (const json& s : sites) {
      if (!s.is_object() || !s.contains("name") || !s["name"].is_string()) continue;
      const std::string name = s["name"].get<std::string>();
      const bool titled = s.contains("title") && s["title"].is_string();
      if (atts->contains(name))
        out.push_back({name, titled ? s["title"].get<std::string>() : name});
    }
  if (out.empty())
    for (auto a = atts->begin(); a != atts->end(); ++a) out.push_back({a.key(), a.key()});
  return out;
}

// A score's title in the registry (interp/head_scores.hpp); a name it does not know (a record
// of another version) with its underscores as spaces.
std::string score_title(const std::string& score) {
  if (const interp::HeadScoreInfo* info = interp::find_head_score(score)) return info->title;
  std::string shown = score;
  std::replace(shown.begin(), shown.end(), '_', ' ');
  return shown;
}

// The best head's value of every pattern score of a probe record, one per attention and score:
// "induction (best head, self-attention)" -> the largest over layers and heads. What shows a
// mechanism forming in a run at a glance (the per-head curves show which head it is).
std::vector<std::pair<std::string, double>> best_heads(const json& rec) {
  std::vector<std::pair<std::string, double>> out;
  for (const ProbeSite& site : probe_sites(rec)) {
    const json& a = rec["probe"]["attentions"][site.name];
    if (!a.is_object()) continue;
    for (auto sc = a.begin(); sc != a.end(); ++sc) {
      // a share of attention (the registry's unit; one it does not know is taken as one)
      const interp::HeadScoreInfo* info = interp::find_head_score(sc.key());
      if (!sc.value().is_array() || (info && info->unit != interp::ScoreUnit::share)) continue;
      double best = -INFINITY;
      for (const json& row : sc.value())
        if (row.is_array())
          for (const json& v : row)
            if (v.is_number()) best = std::max(best, v.get<double>());
      const std::string name = score_title(sc.key());
      if (std::isfinite(best)) out.push_back({name + " (best head, " + site.title + ")", best});
    }
  }
  return out;
}

// Which of its run's series the i-th series of p is (0, 1, ...).
size_t nth_of_run(const Pending& p, size_t i) {
  size_t k = 0;
  for (size_t j = 0; j < i; ++j) k += p.series[j].first.first == p.series[i].first.first;
  return k;
}

}  // namespace

void read_metrics(const std::string& path, RunData& r) {
  if (!fs::exists(path)) {
    r.missing.push_back(
        "no metrics yet: metrics.jsonl does not exist (the run has not logged a "
        "step)");
  } else {
    // Opened without blocking, a regular file only, within a bound: a FIFO or a device named
    // metrics.jsonl is one line of error, not a hang.
    InputRules rules;
    rules.what = "metrics log";
    rules.max_bytes = uint64_t{4} << 30;
    std::istringstream in(read_input(path, rules));
    std::string line, first_bad;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      std::string why;
      std::optional<json> j = try_parse_json<json>(line, why);
      if (j && (!j->is_object() || !j->contains("step") || !(*j)["step"].is_number()))
        why = "not a record with a step", j.reset();
      if (!j) {
        if (r.bad_lines++ == 0) first_bad = "line " + std::to_string(n) + ": " + why;
        continue;
      }
      if (j->value("skipped", false)) ++r.skipped_steps;
      r.records.push_back(std::move(*j));
    }
    if (r.records.empty())
      r.missing.push_back("no metrics yet: metrics.jsonl is empty (the run has not logged a step)");
    if (r.bad_lines > 0)
      r.missing.push_back(std::to_string(r.bad_lines) +
                          " line(s) of metrics.jsonl are not JSON records and were skipped (the "
                          "first, " +
                          first_bad + ")");
  }
}

std::vector<std::pair<std::string, std::string>> flatten_config(const ojson& root) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = root.begin(); it != root.end(); ++it)
    if (!it.value().is_object()) out.push_back({it.key(), it.value().dump()});
  for (auto it = root.begin(); it != root.end(); ++it)
    if (it.value().is_object())
      for (auto kv = it.value().begin(); kv != it.value().end(); ++kv)
        out.push_back({it.key() + "." + kv.key(), kv.value().dump()});
  return out;
}

std::vector<std::string> differing_keys(const std::vector<RunData>& runs) {
  std::vector<std::string> order;
  std::vector<std::map<std::string, std::string>> maps;
  for (const RunData& r : runs) {
    maps.emplace_back();
    for (auto& [k, v] : flatten_config(r.config)) {
      if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
      maps.back()[k] = v;
    }
  }
  std::vector<std::string> out;
  for (const std::string& k : order) {
    std::set<std::string> values;
    for (const auto& m : maps) values.insert(m.count(k) ? m.at(k) : "(absent)");
    if (values.size() > 1) out.push_back(k);
  }
  return out;
}

void check_same_task(const std::vector<RunData>& runs) {
  auto task = [](const RunData& r) {
    const ojson d = r.config.contains("data") ? r.config["data"] : ojson::object();
    std::string t = d.value("task", std::string("?"));
    if (find_name<data::TaskKind>(t) == data::TaskKind::tsv || d.contains("path")) {
      const std::string path = d.value("path", std::string());
      if (!path.empty()) t += " (" + path + ")";
    }
    return t;
  };
  for (size_t i = 1; i < runs.size(); ++i)
    QKV_CHECK(task(runs[i]) == task(runs[0]), "report", "runs of different tasks: ", runs[0].dir,
              " learns ", task(runs[0]), ", ", runs[i].dir, " learns ", task(runs[i]),
              "; compare runs of one task");
}

json final_test(const RunData& r) {
  for (auto it = r.records.rbegin(); it != r.records.rend(); ++it)
    if (it->value("split", std::string()) == "test") return *it;
  return nullptr;
}

std::vector<std::string> metric_order(std::vector<std::string> keys) {
  std::stable_sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) {
    return known_order(a) < known_order(b);
  });
  return keys;
}

int64_t last_step(const RunData& r) {
  int64_t s = 0;
  for (const json& j : r.records)
    if (!j.contains("split")) s = std::max(s, j["step"].get<int64_t>());
  return s;
}

std::vector<MetricChart> metric_charts(const std::vector<RunData>& runs) {
  std::vector<Pending> charts;
  auto chart = [&](const std::string& split, const std::string& key) -> Pending& {
    for (Pending& p : charts)
      if (p.split == split && p.key == key) return p;
    charts.push_back({split, key, {}});
    return charts.back();
  };
  auto add = [&](size_t run, const std::string& split, const std::string& key,
                 const std::string& sub, double step, const json& v) {
    if (!v.is_number()) return;
    Series& s = chart(split, key).at(run, sub);
    s.x.push_back(step);
    s.y.push_back(v.get<double>());
  };
  static const std::set<std::string> kNotMetrics = {"step", "epoch", "split", "examples",
                                                    "skipped"};
  for (size_t r = 0; r < runs.size(); ++r)
    for (const json& rec : runs[r].records) {
      const std::string split = rec.value("split", std::string("train"));
      if (split == "test" || rec.value("skipped", false)) continue;
      const double step = rec["step"].get<double>();
      // A probe record's per-head scores are head_curves' figures; its run-level score a chart.
      if (rec.contains("probe")) {
        if (!rec["probe"].is_object()) continue;
        if (rec["probe"].contains("icl")) add(r, "probe", "icl", "", step, rec["probe"]["icl"]);
        for (const auto& [key, best] : best_heads(rec)) add(r, "probe", key, "", step, best);
        continue;
      }
      for (auto it = rec.begin(); it != rec.end(); ++it) {
        if (kNotMetrics.count(it.key())) continue;
        const json& v = it.value();
        // a number; a per-layer array; an object of numbers or per-layer arrays
        auto one = [&](const std::string& key, const json& x) {
          if (x.is_number()) add(r, split, key, "", step, x);
          if (x.is_array())
            for (size_t i = 0; i < x.size(); ++i)
              add(r, split, key, "layer " + std::to_string(i + 1), step, x[i]);
        };
        if (v.is_object())
          for (auto kv = v.begin(); kv != v.end(); ++kv) one(it.key() + "." + kv.key(), kv.value());
        else
          one(it.key(), v);
      }
    }
  std::stable_sort(charts.begin(), charts.end(), [](const Pending& a, const Pending& b) {
    return std::pair(rank_of(a.split, a.key), known_order(a.key)) <
           std::pair(rank_of(b.split, b.key), known_order(b.key));
  });

  std::vector<MetricChart> out;
  for (Pending& p : charts) {
    const Known* k = known(p.key);
    std::string name = k ? k->name : p.key;
    MetricChart m;
    m.key = p.split + "/" + p.key;
    // "Training loss", "Validation exact match", "Learning rate"
    const bool bare = (p.split == "train" && p.key != "loss") || p.split == "probe";
    m.chart.title = bare ? name : split_word(p.split) + " " + name;
    m.chart.title[0] =
        static_cast<char>(std::toupper(static_cast<unsigned char>(m.chart.title[0])));
    m.chart.x_label = "step (optimizer updates)";
    m.chart.y_label = k ? k->unit : p.split == "probe" ? "share of attention" : p.key;
    std::map<size_t, size_t> per_run;  // series per run
    for (const auto& [id, s] : p.series) ++per_run[id.first];
    bool one_each = true;
    for (const auto& [run, n] : per_run) one_each = one_each && n == 1;
    for (size_t i = 0; i < p.series.size(); ++i) {
      const auto& [run, sub] = p.series[i].first;
      Series s = std::move(p.series[i].second);
      if (runs.size() == 1)
        s.label = sub.empty() ? split_word(p.split) + " " + name : sub;
      else
        s.label = sub.empty() ? runs[run].name : runs[run].name + ", " + sub;
      // A run keeps its colour across charts; its layers are lighter shades of it. One run
      // with several series: a colour each.
      if (one_each || runs.size() > 1)
        s.color = shade(kColors[run % 10], nth_of_run(p, i), per_run[run]);
      else
        s.color = kColors[i % 10];
      m.chart.series.push_back(std::move(s));
    }
    m.chart.log_y = (!k || k->log_ok) && spans_decades(m.chart.series);
    if (m.chart.log_y) m.chart.y_label += ", log";
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// One attention's score across the probe records: a curve per head, NaN where a record lacks it.
HeadCurves score_curves(const std::vector<const json*>& probes, const ProbeSite& site,
                        const std::string& score, int64_t layers, int64_t heads) {
  const std::string& attention = site.name;
  HeadCurves c;
  c.title = site.title + ": " + score_title(score);
  c.layers = layers, c.heads = heads;
  c.values.assign(static_cast<size_t>(layers * heads), {});
  double top = 0;
  for (const json* rec : probes) {
    const json& a = (*rec)["probe"]["attentions"][attention];
    c.steps.push_back((*rec)["step"].get<double>());
    for (int64_t l = 0; l < layers; ++l)
      for (int64_t h = 0; h < heads; ++h) {
        const json& v =
            a.contains(score) ? a[score][static_cast<size_t>(l)][static_cast<size_t>(h)] : json();
        const double y = v.is_number() ? v.get<double>() : NAN;
        if (std::isfinite(y)) top = std::max(top, y);
        c.values[static_cast<size_t>(l * heads + h)].push_back(y);
      }
  }
  // The registry's unit and its bound (a share: 0..1), else 0..the largest value; a score it
  // does not know is taken as a share, as best_heads takes it.
  const interp::HeadScoreInfo* info = interp::find_head_score(score);
  const interp::ScoreUnit unit = info ? info->unit : interp::ScoreUnit::share;
  c.y_label = interp::unit_label(unit);
  c.y_max = interp::unit_max(unit).value_or(std::max(top, 1e-3));
  return c;
}

// True when a record's attention has the layout (layers x heads arrays for every score).
bool same_layout(const json& a, int64_t layers, int64_t heads) {
  if (!a.is_object() || a.value("layers", int64_t{-1}) != layers ||
      a.value("heads", int64_t{-1}) != heads)
    return false;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (!it.value().is_array()) continue;
    if (static_cast<int64_t>(it.value().size()) != layers) return false;
    for (const json& row : it.value())
      if (!row.is_array() || static_cast<int64_t>(row.size()) != heads) return false;
  }
  return true;
}

}  // namespace

std::vector<HeadCurves> probe_head_curves(const RunData& r) {
  const json* first = nullptr;  // the first probe record: its attentions are the layout
  for (const json& rec : r.records)
    if (probe_attentions(rec)) {
      first = &rec;
      break;
    }
  if (!first) return {};
  std::vector<HeadCurves> out;
  for (const ProbeSite& site : probe_sites(*first)) {
    const json& att = (*first)["probe"]["attentions"][site.name];
    const int64_t layers = att.value("layers", int64_t{0});
    const int64_t heads = att.value("heads", int64_t{0});
    if (layers <= 0 || heads <= 0) continue;
    std::vector<const json*> probes;
    for (const json& rec : r.records) {
      const json* atts = probe_attentions(rec);
      if (!atts) continue;
      const auto a = atts->find(site.name);
      if (a != atts->end() && same_layout(*a, layers, heads)) probes.push_back(&rec);
    }
    for (auto score = att.begin(); score != att.end(); ++score)
      if (score.value().is_array())
        out.push_back(score_curves(probes, site, score.key(), layers, heads));
  }
  return out;
}

}  // namespace qkv::figures::report
