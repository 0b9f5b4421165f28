#include "training/records.hpp"

#include <filesystem>
#include <vector>

#include "figures/attention_stats.hpp"
#include "figures/plot.hpp"
#include "figures/report.hpp"

namespace qkv::training {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace figures;

void plot_losses(const std::string& run_dir) {
  report::RunData run;
  report::read_metrics((fs::path(run_dir) / "metrics.jsonl").string(), run);
  Series train{"train loss", {}, {}, ""}, valid{"valid loss", {}, {}, ""};
  for (const config::ojson& j : run.records) {
    if (!j.contains("loss") || !j["loss"].is_number()) continue;  // e.g. a skipped step
    Series* s = !j.contains("split") ? &train : j["split"] == "valid" ? &valid : nullptr;
    if (s == nullptr) continue;
    s->x.push_back(j["step"].get<double>());
    s->y.push_back(j["loss"].get<double>());
  }
  LineChart c{"Loss", "step", "cross-entropy (nats / token)", false, false, {train, valid}};
  write_svg((fs::path(run_dir) / "loss.svg").string(), c);
}

namespace {

// Each layer's attention entropy over the global batch, approximated as the mean of the
// ranks' values weighted by their rows (a rank with an empty shard has no maps).
std::vector<double> global_entropy(const std::vector<ag::Var>& maps, size_t layers, int64_t rows,
                                   int64_t global_rows, train::Distributed& dist) {
  std::vector<double> e(layers, 0.0);
  if (!maps.empty()) {
    const std::vector<double> mine = attention_entropy(maps);
    for (size_t i = 0; i < layers && i < mine.size(); ++i)
      e[i] = mine[i] * static_cast<double>(rows) / static_cast<double>(global_rows);
  }
  dist.allreduce_sum(e.data(), static_cast<int64_t>(e.size()));
  return e;
}

}  // namespace

void add_entropy(json& j, const train::Seq2SeqStep& fwd, train::Distributed& dist) {
  json e = json::object();
  for (const train::SitePatterns& s : fwd.attention_patterns()) {
    if (dist.size() == 1) {
      e[s.site.metric_key()] = attention_entropy(s.layers);
      continue;
    }
    // data-parallel: combined over the ranks
    const data::Batch& b = fwd.batch();
    e[s.site.metric_key()] =
        global_entropy(s.layers, static_cast<size_t>(s.site.layers), b.size(), b.global_size, dist);
  }
  j["attention_entropy"] = std::move(e);
}

}  // namespace qkv::training
