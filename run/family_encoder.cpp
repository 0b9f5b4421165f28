// The encoder-only family: (<cls> + symbols, class) examples in batches planned by length, an
// nn::EncoderClassifier trained on the cross-entropy of its class logits, validated and tested
// by accuracy, loss and each class's counts.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/cancel.hpp"
#include "nn/model_sites.hpp"
#include "run/encoder.hpp"
#include "run/limits.hpp"
#include "run/run.hpp"
#include "run/scores.hpp"
#include "run/train_hooks.hpp"
#include "run/train_run.hpp"
#include "runfolder/average.hpp"

namespace qkv::run {

using nlohmann::json;

json ClassMetrics::counts_json() const {
  json j = json::object();
  for (const ClassCounts& k : classes)
    j[k.name] = {{"examples", k.examples}, {"correct", k.correct}, {"predicted", k.predicted}};
  return j;
}

ClassMetrics evaluate_classes(const nn::EncoderClassifier& model, const data::Dataset& ds,
                              const data::Framing& f, const data::Vocab& names, int64_t batch_size,
                              int64_t limit) {
  const nn::InferenceScope scope(model, current_precision());  // the weights may have changed
  ClassMetrics m;
  for (int64_t k = 0; k < names.size(); ++k) m.classes.push_back({names.token(k)});
  const int64_t n = limit > 0 ? std::min(limit, ds.size()) : ds.size();
  const int64_t bs = std::max<int64_t>(1, batch_size);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t at = 0; at < n; at += bs) {
    cancellation_point();
    std::vector<int64_t> idx;
    for (int64_t i = at; i < std::min(n, at + bs); ++i) idx.push_back(i);
    const data::Batch b = data::make_batch(ds, idx, f);
    const ag::Var logits = model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);  // (B, 1, C)
    const Tensor labels = b.tgt_out.flatten();
    loss_sum += ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), labels, -1).item() *
                static_cast<double>(b.size());
    const std::vector<int64_t> pred = to_vector<int64_t>(argmax(logits.data(), -1).flatten());
    const std::vector<int64_t> truth = to_vector<int64_t>(labels.contiguous());
    for (size_t r = 0; r < truth.size(); ++r) {
      ClassCounts& k = m.classes.at(static_cast<size_t>(truth[r]));
      ++k.examples;
      ++m.classes.at(static_cast<size_t>(pred[r])).predicted;
      if (pred[r] == truth[r]) ++k.correct, ++correct;
    }
  }
  m.examples = n;
  if (n > 0) m.loss = loss_sum / static_cast<double>(n), m.accuracy = double(correct) / double(n);
  return m;
}

namespace {

// "balanced 98/100, unbalanced 95/100": each class's correct of its examples.
std::string counts_text(const ClassMetrics& m) {
  std::string out;
  for (const ClassCounts& k : m.classes)
    out += fmt::format("{}{} {}/{}", out.empty() ? "" : ", ", k.name, k.correct, k.examples);
  return out;
}

json record(const ClassMetrics& m, int64_t step, const char* split) {
  return {{"step", step},           {"split", split},         {"loss", m.loss},
          {"accuracy", m.accuracy}, {"examples", m.examples}, {"classes", m.counts_json()}};
}

const nn::EncoderClassifier& classifier(const nn::Model& model, const char* op) {
  return nn::model_as<nn::EncoderClassifier>(model, op);
}

}  // namespace

std::unique_ptr<nn::Model> EncoderFamily::make_model(const nn::ModelConfig& c,
                                                     Generator& gen) const {
  return std::make_unique<nn::EncoderClassifier>(c, gen, c.pool);
}

std::vector<nn::AttentionSite> EncoderFamily::attention_sites(const nn::ModelConfig& c) const {
  return nn::encoder_classifier_sites(c);
}

// Learned positions end at model.max_len: refuse a longest source beyond them up front.
void EncoderFamily::check_positions(const config::RunConfig& cfg, const data::DataSplits& d) const {
  if (cfg.model.position != nn::PositionKind::learned) return;
  for (const data::Dataset* ds : {&d.train, &d.valid, &d.test})
    for (size_t i = 0; i < ds->examples.size(); ++i) {
      const auto n = static_cast<int64_t>(ds->examples[i].src.size());
      QKV_CHECK(n <= cfg.model.max_len, "model.max_len", "learned positions cover ",
                cfg.model.max_len, " tokens, but ", ds->name, " example ", i + 1, " has ", n,
                " (with <cls>); raise model.max_len or lower data.max_len");
    }
}

std::unique_ptr<data::BatchSource> EncoderFamily::make_loader(const config::RunConfig& cfg,
                                                              const data::DataSplits& d, int rank,
                                                              int ranks) const {
  return examples_loader(cfg, d, rank, ranks);
}

int64_t EncoderFamily::steps_per_epoch(const config::RunConfig& cfg,
                                       const data::DataSplits& d) const {
  return examples_steps_per_epoch(cfg, d, d.train);
}

std::string EncoderFamily::split_sizes(const data::DataSplits& d) const {
  return examples_split_sizes(d);
}

bool EncoderFamily::validate(RunContext& c, train::TrainState& st) const {
  const config::RunConfig& cfg = c.run.config;
  const ClassMetrics m =
      evaluate_classes(classifier(*c.run.model, "validate"), c.run.data.valid, c.run.data.framing,
                       c.run.data.tgt_vocab, cfg.data.batch_size, cfg.train.eval_examples);
  json j = record(m, st.step, "valid");
  j["epoch"] = st.epoch;
  c.metrics.write(j);
  // train.best_metric: exact_match is a classifier's accuracy (one label per example); ties go
  // to the lower loss. (bleu is refused for a task without text.)
  const double score = cfg.train.best_metric == config::BestMetric::loss ? -m.loss : m.accuracy;
  bool better = score > st.best_score || (score == st.best_score && m.loss < st.best_loss);
  if (st.best.empty()) better = true;  // the first validation
  if (better) {
    st.best_score = score;
    st.best_loss = m.loss;
    st.evals_since_best = 0;
  } else {
    ++st.evals_since_best;
  }
  c.say(fmt::format("step {} valid: loss {:.4f}  accuracy {:.4f} ({}){}", st.step, m.loss,
                    m.accuracy, counts_text(m), better ? "  (best)" : ""));
  return better;
}

// The held-out test split with the best checkpoint (or checkpoint.average_last's average).
std::string EncoderFamily::final_result(TrainingRun& r, const train::TrainState& st,
                                        MetricsLog& metrics) const {
  const std::string which = load_final_weights(r);  // the average, else the best
  const ClassMetrics m = evaluate_classes(classifier(*r.model, "test"), r.data.test, r.data.framing,
                                          r.data.tgt_vocab, r.config.data.batch_size);
  json j = record(m, st.step, "test");
  if (r.config.checkpoint.average_last > 0) j["checkpoint"] = kAverageCheckpoint;
  metrics.write(j);
  return fmt::format("done: {} steps; test ({} examples, {}): loss {:.4f}  accuracy {:.4f} ({})",
                     st.step, m.examples, which, m.loss, m.accuracy, counts_text(m));
}

const Family& encoder_family() {  // the registry's (run/family.cpp)
  static const EncoderFamily family;
  return family;
}

int64_t EncoderFamily::max_input_tokens(const config::RunConfig& c, const nn::Model&) const {
  return c.model.position == nn::PositionKind::learned ? c.model.max_len
                                                       : std::numeric_limits<int64_t>::max();
}

// The probe's 2 L tokens are one input the encoder reads; nothing is decoded.
config::ProbeRoom EncoderFamily::probe_room(const config::RunConfig& c,
                                            const nn::Model& model) const {
  return {max_input_tokens(c, model), "model.max_len", std::nullopt};
}

// Every repeated sequence's self-attention maps are kept until all are scored; a copy of one
// map is made while it is scored.
MemoryEstimate EncoderFamily::probe_memory(const config::RunConfig& c, double) const {
  const nn::ModelConfig& m = c.model;
  const double n = 2.0 * static_cast<double>(c.probe.length > 0 ? c.probe.length : 16);
  const double per_input =
      2 * 4 * static_cast<double>(m.heads) * (static_cast<double>(m.encoder_layers) * n * n);
  return probe_estimate(c, static_cast<double>(c.probe.sequences) * per_input, {});
}

// A step's mean source tokens over an epoch (<cls> included); one class id per example.
DataPlan EncoderFamily::data_plan(const TrainingRun& r) const {
  double src = 0;
  for (const data::Example& e : r.data.train.examples) src += static_cast<double>(e.src.size());
  const double steps = static_cast<double>(std::max<int64_t>(1, r.per_epoch));
  DataPlan p;
  p.size_key = "train_examples";
  p.size = r.data.train.size();
  p.size_line = fmt::format("training split   {} examples", p.size);
  p.source_tokens = src / steps;
  p.target_tokens = static_cast<double>(p.size) / steps;
  p.tokens_line = fmt::format("tokens per step  {} source, {} labels (mean over an epoch)",
                              fixed(p.source_tokens, 0), fixed(p.target_tokens, 0));
  return p;
}

void EncoderFamily::describe(const config::RunConfig& c, nlohmann::json& facts) const {
  facts["model"] = fmt::format("{}encoder-only classifier ({} pooling)",
                               c.model.attn_only ? "attention-only " : "", name_of(c.model.pool));
  facts["encoder_layers"] = c.model.encoder_layers;
  write_capabilities(facts);
}

}  // namespace qkv::run
