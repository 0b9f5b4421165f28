// Two of the families of run/family.hpp, each implemented in its own files.
#pragma once
#include <string>
#include <utility>

#include "run/decode.hpp"
#include "run/family.hpp"

namespace qkv::run {

// Pairs (source, target): run/family_seq2seq.cpp.
class Seq2SeqFamily : public Family {
 public:
  int64_t ignore_label() const override { return 0; }
  std::vector<Capability> capabilities() const override { return {Capability::decode}; }
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
  int64_t max_output_tokens(const config::RunConfig& c, int64_t n) const override;
  int64_t scored_output_tokens(const config::RunConfig& c, const data::Framing& f, int64_t n,
                               int64_t target) const override;
  config::ProbeRoom probe_room(const config::RunConfig& c, const nn::Model& model) const override;
  int64_t inspection_tokens(const config::RunConfig& c, int64_t n) const override;
  std::vector<data::Ids> probe_sources(const data::DataSplits& d, const std::string& split,
                                       int64_t n) const override;
  const data::Ids* icl_text(const data::DataSplits&) const override { return nullptr; }
  MemoryEstimate probe_memory(const config::RunConfig& c, double tv) const override;
  bool needs_data(const config::RunConfig&) const override { return true; }
  bool reads_source() const override { return true; }
  DataPlan data_plan(const TrainingRun& r) const override;
  Inspection inspect(const nn::Model& model, const config::RunConfig& c, const data::DataSplits& d,
                     const data::Ids& input) const override;
  void describe(const config::RunConfig& c, nlohmann::json& facts) const override;

  // over a loaded run (run/family_seq2seq_inference.cpp)
  data::Ids encode(const Inference& inf, const std::string& text, const char* op) const override;
  std::string text(const Inference& inf, const data::Ids& ids) const override;
  std::vector<std::string> input_labels(const Inference& inf, const data::Ids& ids) const override;
  std::vector<std::string> output_labels(const Inference& inf, const data::Ids& ids) const override;
  std::string output_name(const Inference& inf) const override;
  std::vector<data::Ids> decode(const Inference& inf, const std::vector<data::Ids>& inputs,
                                const DecodeOptions& o) const override;
  Scores score(const Inference& inf, const ScoreOptions& o) const override;
  void for_each_batch(const Inference& inf, const PassOptions& o,
                      const std::function<void(const BatchPass&)>& fn) const override;
  int64_t pass_tokens(const Inference& inf, const PassOptions& o) const override;
  Tensor logits(const Inference& inf, const data::Ids& input, const data::Ids& tgt_in,
                nn::Hooks* hooks) const override;
  Tensor batch_logits(const Inference& inf, const Tensor& input, const Tensor& tgt_in,
                      nn::Hooks* hooks, const Tensor& input_valid,
                      const Tensor& tgt_valid) const override;

  // The positions the examples of ds need with c's learned positions (their sources, their
  // teacher-forced targets with <bos>/<eos>, and when `decoded`, scored_output_tokens' decodes),
  // and the example that needs the most ("valid example 3"): what check_positions and
  // check_evaluable refuse.
  std::pair<int64_t, std::string> positions_needed(const config::RunConfig& c,
                                                   const data::Framing& f, const data::Dataset& ds,
                                                   bool decoded) const;
  // Refuses, naming model.max_len, a split that evaluation (`qkv eval`) would run past the
  // learned positions with.
  void check_evaluable(const config::RunConfig& c, const data::Framing& f,
                       const data::Dataset& ds) const;
  // scored_output_tokens for c's examples framed by f, as evaluate (run/decode.hpp) takes it;
  // valid while c is.
  ScoredLength scored_length(const config::RunConfig& c, const data::Framing& f) const;
};

// One token stream (data.task = "lm"): run/family_lm.cpp.
class LanguageModelFamily : public Family {
 public:
  int64_t ignore_label() const override { return -1; }
  std::vector<Capability> capabilities() const override { return {Capability::generate}; }
  std::unique_ptr<nn::Model> make_model(const nn::ModelConfig& c, Generator& gen) const override;
  std::vector<nn::AttentionSite> attention_sites(const nn::ModelConfig& c) const override;
  // Its windows of data.block_size tokens within learned positions (model.max_len).
  void check_positions(const config::RunConfig& cfg, const data::DataSplits& d) const override;
  std::unique_ptr<data::BatchSource> make_loader(const config::RunConfig& cfg,
                                                 const data::DataSplits& d, int rank,
                                                 int ranks) const override;
  int64_t steps_per_epoch(const config::RunConfig& cfg, const data::DataSplits& d) const override;
  int64_t total_steps(const config::RunConfig& cfg, int64_t per_epoch) const override;
  std::string split_sizes(const data::DataSplits& d) const override;
  bool validate(RunContext& c, train::TrainState& st) const override;
  std::string final_result(TrainingRun& r, const train::TrainState& st,
                           MetricsLog& metrics) const override;
  int64_t max_input_tokens(const config::RunConfig& c, const nn::Model& model) const override;
  int64_t max_output_tokens(const config::RunConfig& c, int64_t n) const override;
  config::ProbeRoom probe_room(const config::RunConfig& c, const nn::Model& model) const override;
  int64_t inspection_tokens(const config::RunConfig& c, int64_t n) const override;
  std::vector<data::Ids> probe_sources(const data::DataSplits& d, const std::string& split,
                                       int64_t n) const override;
  const data::Ids* icl_text(const data::DataSplits& d) const override { return &d.lm_valid; }
  MemoryEstimate probe_memory(const config::RunConfig& c, double tv) const override;
  bool needs_data(const config::RunConfig& c) const override;
  bool reads_source() const override { return false; }
  DataPlan data_plan(const TrainingRun& r) const override;
  Inspection inspect(const nn::Model& model, const config::RunConfig& c, const data::DataSplits& d,
                     const data::Ids& input) const override;
  void describe(const config::RunConfig& c, nlohmann::json& facts) const override;
  // over a loaded run (run/family_lm_inference.cpp)
  data::Ids encode(const Inference& inf, const std::string& text, const char* op) const override;
  std::string text(const Inference& inf, const data::Ids& ids) const override;
  std::vector<std::string> input_labels(const Inference& inf, const data::Ids& ids) const override;
  std::vector<std::string> output_labels(const Inference& inf, const data::Ids& ids) const override;
  std::string output_name(const Inference& inf) const override;
  void generate(const Inference& inf, const data::Ids& prompt, int64_t n, const SampleOptions& o,
                Generator& gen, bool cached,
                const std::function<void(int64_t)>& on_token) const override;
  Scores score(const Inference& inf, const ScoreOptions& o) const override;
  void for_each_batch(const Inference& inf, const PassOptions& o,
                      const std::function<void(const BatchPass&)>& fn) const override;
  int64_t pass_tokens(const Inference& inf, const PassOptions& o) const override;
  Tensor logits(const Inference& inf, const data::Ids& input, const data::Ids& tgt_in,
                nn::Hooks* hooks) const override;
  Tensor batch_logits(const Inference& inf, const Tensor& input, const Tensor& tgt_in,
                      nn::Hooks* hooks, const Tensor& input_valid,
                      const Tensor& tgt_valid) const override;
};

}  // namespace qkv::run
