// The encoder-only family (model.kind = "encoder", data family classify: dyck, parity,
// majority): an nn::EncoderClassifier reads <cls> + a string of symbols and gives one class.
// Its Family: run/family_encoder.cpp (model, batches, validation and test by accuracy, loss and
// per-class counts) and, over a loaded run, run/family_encoder_inference.cpp (classify, score,
// the encoder's self-attention); the registry's encoder_family (run/family.cpp) returns it, and
// no consumer names it.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "nn/encoder_classifier.hpp"
#include "run/family.hpp"
#include "run/inference.hpp"

namespace qkv::run {

// One class's counts over a split: its examples, those classified right, and how often the
// model predicted it.
struct ClassCounts {
  std::string name;
  int64_t examples = 0, correct = 0, predicted = 0;
};

// A split classified: the loss and accuracy, and the counts of each class (in class-id order).
struct ClassMetrics {
  double loss = 0;      // mean cross-entropy per example (nats), no label smoothing
  double accuracy = 0;  // argmax == label, over examples
  int64_t examples = 0;
  std::vector<ClassCounts> classes;
  // {"unbalanced": {"examples", "correct", "predicted"}, ...}: metrics.jsonl's "classes"
  nlohmann::json counts_json() const;
};

// The first `limit` (0: all) examples of ds through model in batches of batch_size, in order,
// in eval mode without recording (the caller's precision); `names` the classes' names.
ClassMetrics evaluate_classes(const nn::EncoderClassifier& model, const data::Dataset& ds,
                              const data::Framing& f, const data::Vocab& names, int64_t batch_size,
                              int64_t limit = 0);

class EncoderFamily : public Family {
 public:
  int64_t ignore_label() const override { return -1; }  // class 0 is a label like any other
  std::vector<Capability> capabilities() const override { return {Capability::classify}; }
  std::unique_ptr<nn::Model> make_model(const nn::ModelConfig& c, Generator& gen) const override;
  std::vector<nn::AttentionSite> attention_sites(const nn::ModelConfig& c) const override;
  void check_positions(const config::RunConfig& cfg, const data::DataSplits& d) const override;
  std::unique_ptr<data::BatchSource> make_loader(const config::RunConfig& cfg,
                                                 const data::DataSplits& d, int rank,
                                                 int ranks) const override;
  int64_t steps_per_epoch(const config::RunConfig& cfg, const data::DataSplits& d) const override;
  std::string split_sizes(const data::DataSplits& d) const override;
  bool validate(RunContext& c, train::TrainState& st) const override;
  std::string final_result(TrainingRun& r, const train::TrainState& st,
                           MetricsLog& metrics) const override;
  int64_t max_input_tokens(const config::RunConfig& c, const nn::Model& model) const override;
  int64_t max_output_tokens(const config::RunConfig&, int64_t) const override { return 1; }
  config::ProbeRoom probe_room(const config::RunConfig& c, const nn::Model& model) const override;
  int64_t inspection_tokens(const config::RunConfig&, int64_t n) const override { return n; }
  // Its one attention reads the input itself: no second sequence, no text stream.
  std::vector<data::Ids> probe_sources(const data::DataSplits&, const std::string&,
                                       int64_t) const override {
    return {};
  }
  const data::Ids* icl_text(const data::DataSplits&) const override { return nullptr; }
  MemoryEstimate probe_memory(const config::RunConfig& c, double tv) const override;
  bool needs_data(const config::RunConfig&) const override { return true; }  // class names
  bool reads_source() const override { return true; }
  DataPlan data_plan(const TrainingRun& r) const override;
  Inspection inspect(const nn::Model& model, const config::RunConfig& c, const data::DataSplits& d,
                     const data::Ids& input) const override;
  void describe(const config::RunConfig& c, nlohmann::json& facts) const override;
  // over a loaded run (run/family_encoder_inference.cpp)
  // <cls> then one id per symbol: each non-space character of text is a symbol of the task.
  data::Ids encode(const Inference& inf, const std::string& text, const char* op) const override;
  std::string text(const Inference& inf, const data::Ids& ids) const override;
  std::vector<std::string> input_labels(const Inference& inf, const data::Ids& ids) const override;
  std::vector<std::string> output_labels(const Inference& inf, const data::Ids& ids) const override;
  std::string output_name(const Inference& inf) const override;
  std::vector<Classification> classify(const Inference& inf,
                                       const std::vector<data::Ids>& inputs) const override;
  Scores score(const Inference& inf, const ScoreOptions& o) const override;
  void for_each_batch(const Inference& inf, const PassOptions& o,
                      const std::function<void(const BatchPass&)>& fn) const override;
  int64_t pass_tokens(const Inference& inf, const PassOptions& o) const override;
  // The class logits (1, C) of input; tgt_in is not read (a classifier has no output side).
  Tensor logits(const Inference& inf, const data::Ids& input, const data::Ids& tgt_in,
                nn::Hooks* hooks) const override;
  // (B, 1, C) over input (B, S); tgt_in is not read.
  Tensor batch_logits(const Inference& inf, const Tensor& input, const Tensor& tgt_in,
                      nn::Hooks* hooks, const Tensor& input_valid,
                      const Tensor& tgt_valid) const override;
};

// An inspection's read-out (its tgt_in's one id): the position the classifier pools, labelled
// "<cls>" or "mean" on the output side.
inline constexpr int64_t kReadout = -1;

}  // namespace qkv::run
