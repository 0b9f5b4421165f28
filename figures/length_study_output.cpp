// The length study's outputs (figures/length_study.hpp): its table, its part of layers.json and
// its figures.
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "figures/length_study.hpp"
#include "figures/plot.hpp"

namespace qkv::figures {

nlohmann::ordered_json length_study_json(const std::vector<LengthCurve>& r,
                                         const LengthStudyOptions& o) {
  nlohmann::ordered_json curves = nlohmann::ordered_json::array();
  for (const LengthCurve& c : r)
    curves.push_back({{"model", c.model},
                      {"task", c.task},
                      {"parameters", c.parameters},
                      {"n", c.n},
                      {"exact_match", c.exact_match},
                      {"final_loss", c.final_loss},
                      {"seconds", c.seconds},
                      {"profile_init", c.profile_init},
                      {"profile_trained", c.profile_trained}});
  return {{"settings",
           {{"models", o.models},
            {"tasks", o.tasks},
            {"d", o.d},
            {"heads", o.heads},
            {"encoder_layers", o.layers},
            {"decoder_layers", 1},
            {"steps", o.steps},
            {"batch", o.batch},
            {"vocab", o.vocab},
            {"train_lengths", {1, o.train_max_len}},
            {"eval_lengths", o.eval_lengths},
            {"eval_examples", o.eval_examples},
            {"lr", o.lr},
            {"warmup", o.warmup},
            {"profile_length", o.profile_length},
            {"seed", o.seed}}},
          {"curves", curves}};
}

std::string length_table(const std::vector<LengthCurve>& r, const LengthStudyOptions& o) {
  std::ostringstream s;
  s << "exact match against length: d = " << o.d << ", " << o.layers
    << " encoder layer(s), one decoder layer, " << o.steps << " steps of " << o.batch
    << " examples of lengths 1.." << o.train_max_len << " each; " << o.eval_examples
    << " examples per length (* = longer than any trained on)\n";
  for (const std::string& task : o.tasks) {
    s << "\n" << task << "\nmodel              params  final loss |";
    for (int64_t n : o.eval_lengths) {
      char h[16];
      std::snprintf(h, sizeof h, " %4lld%s", static_cast<long long>(n),
                    n > o.train_max_len ? "*" : " ");
      s << h;
    }
    s << "\n";
    for (const LengthCurve& c : r) {
      if (c.task != task) continue;
      char line[96];
      std::snprintf(line, sizeof line, "%-16s %8lld  %10.4f |", c.model.c_str(),
                    static_cast<long long>(c.parameters), c.final_loss);
      s << line;
      for (double e : c.exact_match) {
        char v[16];
        std::snprintf(v, sizeof v, "  %4.2f", e);
        s << v;
      }
      s << "\n";
    }
  }
  return s.str();
}

namespace {

Series profile_series(const std::string& label, const nlohmann::json& p) {
  Series s{label, {}, {}, ""};
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i].get<double>() > 0) s.x.push_back(static_cast<double>(i)), s.y.push_back(p[i]);
  return s;
}

}  // namespace

LengthCharts length_charts(const nlohmann::json& t, const std::string& prefix) {
  const nlohmann::json& st = t["settings"];
  const std::string steps = st.value("steps", nlohmann::json(0)).dump(),
                    trained = st.value("train_lengths", nlohmann::json::array()).dump();
  LengthCharts c;
  std::vector<std::string> tasks;
  for (const nlohmann::json& x : t["curves"]) {
    const std::string task = x.value("task", std::string("?"));
    size_t k = 0;
    while (k < tasks.size() && tasks[k] != task) ++k;
    if (k == tasks.size()) {
      tasks.push_back(task);
      c.exact.push_back({task + ": exact match against length, " + steps +
                             " steps each, trained on lengths " + trained,
                         "length n",
                         "exact match",
                         false,
                         false,
                         {}});
    }
    Series s{prefix + x.value("model", std::string("?")), {}, {}, ""};
    for (const nlohmann::json& n : x["n"]) s.x.push_back(n.get<double>());
    for (const nlohmann::json& e : x["exact_match"]) s.y.push_back(e.get<double>());
    c.exact[k].series.push_back(std::move(s));
  }
  c.path = {"Encoder gradient norm |d (u . memory_j) / d embed_i|, j = n - 1, n = " +
                st.value("profile_length", nlohmann::json(0)).dump() +
                (tasks.empty() ? std::string() : ", trained on " + tasks.front()),
            "distance |i - j|",
            "gradient norm (zeros not drawn)",
            false,
            true,
            {}};
  for (const nlohmann::json& x : t["curves"]) {
    if (tasks.empty() || x.value("task", std::string()) != tasks.front()) continue;
    const std::string m = prefix + x.value("model", std::string("?"));
    c.path.series.push_back(profile_series(m + " (trained)", x["profile_trained"]));
    c.path.series.push_back(profile_series(m + " (init)", x["profile_init"]));
  }
  return c;
}

void write_length_figures(const std::string& dir, const std::vector<LengthCurve>& r,
                          const LengthStudyOptions& o) {
  namespace fs = std::filesystem;
  if (r.empty()) return;
  const LengthCharts c = length_charts(length_study_json(r, o));
  for (size_t k = 0; k < c.exact.size() && k < o.tasks.size(); ++k)  // the JSON's task order
    write_svg((fs::path(dir) / ("exact_match_" + o.tasks[k] + ".svg")).string(), c.exact[k]);
  write_svg((fs::path(dir) / "path_trained.svg").string(), c.path);
}

}  // namespace qkv::figures
