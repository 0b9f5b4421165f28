// One row per head: importance, ablation losses and pattern scores (inspect/head_table.hpp).
#include "inspect/head_table.hpp"

#include "inspect/site_json.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "core/error.hpp"
#include "inspect/site_json.hpp"
#include "interp/head_scores.hpp"
#include "interp/repeated_tokens.hpp"
#include "run/family.hpp"
#include "run/inference.hpp"
#include "run/run.hpp"

namespace qkv::inspect {

namespace {

// The inputs the pattern scores are measured on: repeated random token rows of the input
// vocabulary, each as long as the model's positions allow (with room for the decoded output).
std::vector<data::Ids> repeated_rows(const config::RunConfig& c, const data::DataSplits& d,
                                     const nn::Model& model, const HeadTableOptions& o,
                                     const std::string& key, int64_t& length) {
  const data::Vocab& v = d.src_vocab.size() > 4 ? d.src_vocab : d.tgt_vocab;
  const config::ProbeRoom room = run::family_for(c.data.task).probe_room(c, model);
  // 0: the longest up to 16 that fits with the 2 L input a position short of the model's
  const int64_t fits = std::min(config::longest_probe_length(room), (room.positions - 1) / 2);
  length = o.probe_length > 0 ? o.probe_length : std::clamp<int64_t>(fits, 1, 16);
  config::check_probe_length(length, room, key);
  interp::RepeatedTokens spec{.batch = o.probes, .length = length, .vocab = v.size()};
  for (int64_t id = 0; id < v.size(); ++id)
    if (v.is_special(id)) spec.specials.push_back(id);
  Generator g(o.seed);
  const Tensor rows = interp::repeated_tokens(spec, g);  // (probes, 2 L)
  std::vector<data::Ids> out_rows;
  for (int64_t b = 0; b < rows.size(0); ++b)
    out_rows.push_back(to_vector<int64_t>(rows.select(0, b)));
  return out_rows;
}

// The pattern of one attention's layer in an inspection, with its query (and key) tokens.
interp::AttentionProbe probe_of(const run::Inspection& in, const Attention& a, int64_t layer) {
  interp::AttentionProbe p;
  const run::AttentionView* v = in.view(a.hook() + ".pattern");
  QKV_CHECK(v != nullptr, "heads", "the inspection has no view of the ", a.name, " attention");
  // (1, h, n, m)
  p.pattern = v->layers.at(static_cast<size_t>(layer)).unsqueeze(0).to(DType::f32);
  const data::Ids& q = a.queries == nn::Side::input ? in.input : in.tgt_in;
  p.ids = run::row_of(q);
  if (a.cross()) p.key_ids = run::row_of(in.input);
  return p;
}

// Each score of the attention's kind, averaged over the inspections.
AttentionScores scores_of(const std::vector<run::Inspection>& ins, const Attention& a) {
  AttentionScores out{a, {}};
  for (const auto& [name, score] : interp::kHeadScoreNames) {
    const interp::ScoredAttention kind = interp::attention_of(score);
    if (kind != interp::ScoredAttention::any &&
        (kind == interp::ScoredAttention::cross) != a.cross())
      continue;
    std::vector<std::vector<double>>& layers = out.scores[std::string(name)];
    for (int64_t l = 0; l < a.layers; ++l) {
      std::vector<double> mean(static_cast<size_t>(a.heads), 0.0);
      for (const run::Inspection& in : ins) {
        const std::vector<double> s = interp::head_score(score, probe_of(in, a, l));
        for (size_t h = 0; h < mean.size(); ++h) mean[h] += s[h] / static_cast<double>(ins.size());
      }
      layers.push_back(std::move(mean));
    }
  }
  return out;
}

}  // namespace

std::pair<double, int64_t> split_loss(const run::Inference& inf, const std::string& split,
                                      int64_t max_batches, nn::Hooks* hooks) {
  double sum = 0;
  int64_t tokens = 0, batches = 0;
  inf.for_each_batch({.split = split, .max_batches = max_batches, .hooks = hooks},
                     [&](const run::BatchPass& p) {
                       sum += p.loss.item() * static_cast<double>(p.tokens);
                       tokens += p.tokens;
                       ++batches;
                     });
  return {tokens ? sum / static_cast<double>(tokens) : 0.0, batches};
}

std::map<std::string, std::vector<double>> head_importance(const run::Inference& inf,
                                                           const std::vector<Attention>& attentions,
                                                           const std::string& split,
                                                           int64_t max_batches) {
  nn::Hooks hooks;  // inside the caller's (an ablation stays in place)
  const std::map<std::string, ag::Var> xi = add_head_masks(hooks, attentions);
  std::map<std::string, std::vector<double>> out;
  int64_t batches = 0;
  inf.for_each_batch({.split = split, .max_batches = max_batches, .record = true, .hooks = &hooks},
                     [&](const run::BatchPass& p) {
                       p.loss.backward();
                       for (const auto& [point, x] : xi) {
                         std::vector<double>& acc = out[point];
                         acc.resize(static_cast<size_t>(x.numel()), 0.0);
                         if (x.grad().defined()) {
                           const std::vector<double> g = to_vector<double>(x.grad().to(DType::f64));
                           for (size_t h = 0; h < g.size(); ++h) acc[h] += std::abs(g[h]);
                         }
                         const_cast<ag::Var&>(x).zero_grad();
                       }
                       // dL/dW is not wanted: the weights' gradients stay empty
                       for (ag::Var w : inf.model().parameters()) w.zero_grad();
                       ++batches;
                     });
  for (auto& [point, acc] : out)
    for (double& v : acc) v /= static_cast<double>(std::max<int64_t>(1, batches));
  return out;
}

PatternProbe pattern_probe(const config::RunConfig& c, const data::DataSplits& d,
                           const nn::Model& model, const HeadTableOptions& o,
                           const std::string& key) {
  PatternProbe p;
  p.repeated = repeated_rows(c, d, model, o, key, p.length);
  p.sources = run::family_for(c.data.task).probe_sources(d, o.split, o.probes);
  return p;
}

namespace {

// Every attention's scores on probe, each input inspected by `inspect`.
std::vector<AttentionScores> scores_on(
    const std::vector<Attention>& atts, const PatternProbe& probe,
    const std::function<run::Inspection(const data::Ids&)>& inspect) {
  // The inputs of the scores: repeated tokens for self-attention, split examples for cross.
  const auto inspect_all = [&](const std::vector<data::Ids>& inputs) {
    std::vector<run::Inspection> out;
    for (const data::Ids& ids : inputs) out.push_back(inspect(ids));
    return out;
  };
  const std::vector<run::Inspection> repeated = inspect_all(probe.repeated);
  const bool has_cross =
      std::any_of(atts.begin(), atts.end(), [](const Attention& a) { return a.cross(); });
  const std::vector<run::Inspection> examples =
      has_cross ? inspect_all(probe.sources) : std::vector<run::Inspection>{};
  std::vector<AttentionScores> out;
  for (const Attention& a : atts) out.push_back(scores_of(a.cross() ? examples : repeated, a));
  return out;
}

}  // namespace

std::vector<AttentionScores> pattern_scores(const nn::Model& model, const config::RunConfig& c,
                                            const data::DataSplits& d, const PatternProbe& probe) {
  const run::Family& family = run::family_for(c.data.task);
  return scores_on(attentions_of(model, c.model.heads), probe,
                   [&](const data::Ids& ids) { return family.inspect(model, c, d, ids); });
}

std::vector<AttentionScores> pattern_scores(const run::Inference& inf, const PatternProbe& probe) {
  return scores_on(attentions_of(inf), probe,
                   [&](const data::Ids& ids) { return inf.inspect(ids); });
}

HeadTable head_table(const run::Inference& inf, const HeadTableOptions& o) {
  const std::vector<Attention> atts = attentions_of(inf);
  const run::LoadedRun& r = inf.run();
  HeadTable t;
  t.split = o.split;
  t.sites = atts;
  std::tie(t.loss, t.batches) = split_loss(inf, o.split, o.max_batches);
  const auto importance = head_importance(inf, atts, o.split, o.max_batches);
  const MeanZ means = mean_z(inf, atts, o.split, o.max_batches);
  const PatternProbe probe = pattern_probe(r.config, r.data, inf.model(), o);
  t.probe_length = probe.length;
  for (const AttentionScores& s : pattern_scores(inf, probe)) {
    const Attention& a = s.attention;
    for (int64_t l = 0; l < a.layers; ++l)
      for (int64_t h = 0; h < a.heads; ++h) {
        HeadRow row;
        row.attention = a.name, row.name = a.head_name(l, h), row.layer = l, row.head = h;
        row.importance = importance.at(a.z(l))[static_cast<size_t>(h)];
        const std::vector<HeadRef> one{{a, l, h}};
        nn::Hooks zero, mean;  // each a layer inside the caller's (an ablation stays in place)
        add_zero_ablation(zero, one);
        add_mean_ablation(mean, one, means);
        row.zero_loss_change = split_loss(inf, o.split, o.max_batches, &zero).first - t.loss;
        row.mean_loss_change = split_loss(inf, o.split, o.max_batches, &mean).first - t.loss;
        for (const auto& [name, layers] : s.scores)
          row.scores[name] = layers[static_cast<size_t>(l)][static_cast<size_t>(h)];
        t.rows.push_back(std::move(row));
      }
  }
  return t;
}

namespace {

const char* attention_name(interp::ScoredAttention a) {
  switch (a) {
    case interp::ScoredAttention::self:
      return "self";
    case interp::ScoredAttention::cross:
      return "cross";
    case interp::ScoredAttention::any:
      return "any";
  }
  return "any";
}

// One of the table's own columns: a loss of the split per token (the importance is dL/dxi of
// that loss), on every attention, not recorded while training.
HeadColumn own_column(const char* name, const char* title, const char* description) {
  HeadColumn c;
  c.name = name, c.title = title, c.unit = "nats per token", c.attention = "any";
  c.description = description;
  return c;
}

HeadColumn score_column(const interp::HeadScoreInfo& s) {
  HeadColumn c;
  c.name = s.name, c.title = s.title, c.unit = interp::unit_label(s.unit);
  c.max = interp::unit_max(s.unit), c.decimals = s.decimals;
  c.attention = attention_name(s.attention), c.probe = true, c.description = s.description;
  return c;
}

std::vector<HeadColumn> make_columns() {
  std::vector<HeadColumn> c{
      own_column("importance", "importance",
                 "mean |dL/dxi| of a mask xi on the head's output (Michel et al. 2019)"),
      own_column("zero_loss_change", "zero loss change",
                 "the split's loss with the head's output set to 0, minus the loss"),
      own_column("mean_loss_change", "mean loss change",
                 "the split's loss with the head's output replaced by its mean, minus the loss")};
  for (const interp::HeadScoreInfo& s : interp::kHeadScores) c.push_back(score_column(s));
  return c;
}

}  // namespace

const std::vector<HeadColumn>& head_columns() {
  static const std::vector<HeadColumn> columns = make_columns();
  return columns;
}

std::vector<std::pair<const HeadColumn*, double>> head_values(const HeadRow& r) {
  const std::vector<HeadColumn>& all = head_columns();
  std::vector<std::pair<const HeadColumn*, double>> out{
      {&all[0], r.importance}, {&all[1], r.zero_loss_change}, {&all[2], r.mean_loss_change}};
  for (size_t i = 3; i < all.size(); ++i)
    if (const auto v = r.scores.find(all[i].name); v != r.scores.end())
      out.emplace_back(&all[i], v->second);
  return out;
}

nlohmann::json head_columns_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const HeadColumn& c : head_columns()) {
    nlohmann::json j{{"name", c.name},
                     {"title", c.title},
                     {"unit", c.unit},
                     {"decimals", c.decimals},
                     {"attention", c.attention},
                     {"probe", c.probe},
                     {"description", c.description}};
    if (c.max) j["max"] = *c.max;
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json head_table_json(const HeadTable& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const HeadRow& r : t.rows) {
    nlohmann::json j{
        {"attention", r.attention}, {"head", r.name}, {"layer", r.layer}, {"index", r.head}};
    for (const auto& [column, v] : head_values(r)) j[column->name] = v;
    rows.push_back(j);
  }
  return {{"split", t.split},
          {"loss", t.loss},
          {"batches", t.batches},
          {"probe_length", t.probe_length},
          {"columns", head_columns_json()},
          {"sites", sites_json(t.sites)},
          {"heads", rows}};
}

}  // namespace qkv::inspect
