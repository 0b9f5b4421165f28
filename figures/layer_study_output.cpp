// qkv layers' outputs: the table in the lesson's columns, layers.json and the two figures.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "figures/layer_study.hpp"
#include "figures/plot.hpp"

namespace qkv::figures {

namespace {

// The lesson's asymptotic column entries, per layer.
struct Lesson {
  const char* cost;
  const char* steps;
  const char* path;
};

Lesson lesson_row(LayerKind k) {
  switch (k) {
    case LayerKind::attention:
      return {"O(n^2 d)", "O(1)", "O(1)"};
    case LayerKind::gru:
    case LayerKind::lstm:
      return {"O(n d^2)", "O(n)", "O(n)"};
    case LayerKind::conv:
      return {"O(w n d^2)", "O(1)", "O(log_w n)"};
  }
  return {"", "", ""};
}

// The largest distance whose gradient norm is at least 1e-6 of the profile's largest: how far
// back the last position's output visibly reaches at initialisation.
int64_t reach(const std::vector<double>& profile) {
  double top = 0;
  for (double v : profile) top = std::max(top, v);
  int64_t r = 0;
  for (size_t i = 0; i < profile.size(); ++i)
    if (profile[i] >= 1e-6 * top && top > 0) r = static_cast<int64_t>(i);
  return r;
}

}  // namespace

std::string layer_table(const std::vector<LayerResult>& rs, const LayerStudyOptions& o) {
  std::ostringstream s;
  const int64_t n_max = rs.empty() ? 0 : rs.front().n.back();
  s << "d = " << o.d << ", batch " << o.batch << ", one layer each; time = median of " << o.repeats
    << " forward+backward passes; exponent fitted on the larger half of n; profile at n = "
    << o.profile_length << ", j = n - 1\n\n";
  s << "layer      | lesson: cost      steps  path      | FLOPs fwd @n=" << n_max
    << "  time fwd+bwd @n=" << n_max << "  exponent  seq. steps @n=" << n_max
    << "  |grad| at d=1  at d=n-1  reach\n";
  for (const LayerResult& r : rs) {
    const Lesson l = lesson_row(r.kind);
    char line[400];
    std::snprintf(
        line, sizeof line,
        "%-10s | %-12s %-6s %-10s| %14.4g  %12.4g s  %8.2f  %10lld  %12.3g  %9.3g  %5lld\n",
        layer_name(r.kind), l.cost, l.steps, l.path, static_cast<double>(r.flops.back()),
        r.seconds.back(), r.exponent, static_cast<long long>(r.steps.back()),
        r.profile.size() > 1 ? r.profile[1] : 0.0, r.profile.back(),
        static_cast<long long>(reach(r.profile)));
    s << line;
  }
  s << "\nreach: the largest |i - j| whose gradient norm is >= 1e-6 of the largest, at "
       "initialisation (untrained)\n";
  return s.str();
}

nlohmann::ordered_json layer_study_json(const std::vector<LayerResult>& rs,
                                        const LayerStudyOptions& o) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerResult& r : rs) {
    const Lesson l = lesson_row(r.kind);
    layers.push_back({{"layer", layer_name(r.kind)},
                      {"lesson", {{"cost", l.cost}, {"steps", l.steps}, {"path", l.path}}},
                      {"n", r.n},
                      {"seconds", r.seconds},
                      {"flops_forward", r.flops},
                      {"sequential_steps", r.steps},
                      {"exponent", r.exponent},
                      {"profile", r.profile},
                      {"reach", reach(r.profile)}});
  }
  return {{"settings",
           {{"d", o.d},
            {"heads", o.heads},
            {"kernel", o.kernel},
            {"conv_layers", o.conv_layers},
            {"conv_causal", o.conv_causal},
            {"gru_lstm_directions", 1},
            {"batch", o.batch},
            {"repeats", o.repeats},
            {"lengths", o.lengths},
            {"profile_length", o.profile_length},
            {"profile_batch", o.profile_batch},
            {"seed", o.seed}}},
          {"layers", layers}};
}

LayerCharts layer_charts(const nlohmann::json& j, const std::string& prefix) {
  const nlohmann::json& st = j["settings"];
  const std::string d = st.value("d", nlohmann::json(0)).dump();
  LayerCharts c{{"Forward + backward time of one layer, d = " + d + ", batch " +
                     st.value("batch", nlohmann::json(0)).dump(),
                 "sequence length n",
                 "seconds (median)",
                 true,
                 true,
                 {}},
                {"Gradient norm |d (u . out_j) / d x_i| at initialisation, j = n - 1, n = " +
                     st.value("profile_length", nlohmann::json(0)).dump(),
                 "distance |i - j|",
                 "gradient norm (zeros not drawn)",
                 false,
                 true,
                 {}}};
  for (const nlohmann::json& l : j["layers"]) {
    const std::string label = prefix + l.value("layer", std::string("?"));
    Series t{label, {}, {}, ""};
    for (const nlohmann::json& n : l["n"]) t.x.push_back(n.get<double>());
    for (const nlohmann::json& s : l["seconds"]) t.y.push_back(s.get<double>());
    c.time.series.push_back(std::move(t));
    Series p{label, {}, {}, ""};
    const nlohmann::json& profile = l["profile"];
    for (size_t i = 0; i < profile.size(); ++i)
      if (profile[i].get<double>() > 0)
        p.x.push_back(static_cast<double>(i)), p.y.push_back(profile[i].get<double>());
    c.path.series.push_back(std::move(p));
  }
  return c;
}

void write_layer_figures(const std::string& dir, const std::vector<LayerResult>& rs,
                         const LayerStudyOptions& o) {
  namespace fs = std::filesystem;
  const LayerCharts c = layer_charts(layer_study_json(rs, o));
  write_svg((fs::path(dir) / "time.svg").string(), c.time);
  write_svg((fs::path(dir) / "path.svg").string(), c.path);
}

}  // namespace qkv::figures
