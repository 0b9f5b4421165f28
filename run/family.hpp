// A model family: its model, what a run of it trains on, how it draws batches, validates and
// reports, its length rules and its capabilities. `qkv train`, the run hooks and the subcommands
// ask the run's Family instead of branching on data.task.
//
//   Seq2SeqFamily        (run/family_seq2seq.cpp)  pairs: copy, reverse, sort, annotated_copy,
//                                                  dates, tsv, parallel; an nn::EncoderDecoder
//   LanguageModelFamily  (run/family_lm.cpp)       one token stream (lm, repeat); an
//                                                  nn::DecoderLM, nanoGPT's loss estimates
//   EncoderFamily        (run/family_encoder.cpp)  classes (dyck, parity, majority); an
//                                                  nn::EncoderClassifier, accuracy
//
// A family is one class: one static object, stateless, answering everything family-specific.
// Part of it needs no loaded weights (config checks, building the model, loaders, the length
// rules, validation during training); the rest is asked by the one family-free Inference
// (run/inference.hpp) holding a loaded run, passed in as the first argument of each such call
// (the section "over a loaded run" below; by convention in run/family_<name>_inference.cpp).
// A consumer holds a Family or an Inference and never names a family.
//
// family_for (run/family.cpp) is the registry: one line per data family (QKV_FAMILIES), naming
// the function of the family's own file that returns it, e.g. `const Family& seq2seq_family()`.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "data/config.hpp"
#include "data/loader.hpp"
#include "nn/hooks.hpp"
#include "nn/model.hpp"
#include "run/capability.hpp"
#include "run/limits.hpp"
#include "train/state.hpp"

namespace qkv::run {

struct RunContext;      // run/train_hooks.hpp
struct Inspection;      // run/inference.hpp
class Inference;        // run/inference.hpp
struct DecodeOptions;   // run/inference.hpp
struct ScoreOptions;    // run/inference.hpp
struct PassOptions;     // run/inference.hpp
struct BatchPass;       // run/inference.hpp
struct Classification;  // run/inference.hpp
struct Scores;          // run/scores.hpp
struct SampleOptions;   // run/lm.hpp
class MetricsLog;       // run/train_hooks.hpp
struct TrainingRun;     // run/train_run.hpp

// The training data of a run as `qkv train --dry-run` reports it (apps/dry_run.cpp).
struct DataPlan {
  std::string size_key;   // its JSON key: "train_examples", "train_tokens"
  int64_t size = 0;       // examples or tokens
  std::string size_line;  // the text line: "training split   10000 examples"
  // A step's mean tokens on each side (a language model's are all "target")
  double source_tokens = 0, target_tokens = 0;
  std::string tokens_line;  // "tokens per step  348 source + 411 target (mean over an epoch)"
};

class Family {
 public:
  virtual ~Family() = default;

  // The label the loss ignores: <pad> (0) for pairs; -1 (none) for running text.
  virtual int64_t ignore_label() const = 0;

  // The family's model, an nn::EncoderDecoder or nn::DecoderLM, for c (vocabularies filled in), its
  // weights drawn from gen.
  virtual std::unique_ptr<nn::Model> make_model(const nn::ModelConfig& c, Generator& gen) const = 0;
  // The attention sites make_model(c)'s model has (its attention_sites()), from c alone: what a
  // run's page reads without loading its weights (serve's run facts, "sites").
  virtual std::vector<nn::AttentionSite> attention_sites(const nn::ModelConfig& c) const = 0;

  // Refuses, naming the key, data the model's positions cannot hold (before any file exists).
  virtual void check_positions(const config::RunConfig& cfg, const data::DataSplits& d) const = 0;
  // This rank's training batches (rank of ranks, data-parallel).
  virtual std::unique_ptr<data::BatchSource> make_loader(const config::RunConfig& cfg,
                                                         const data::DataSplits& d, int rank,
                                                         int ranks) const = 0;
  // Batches in an epoch (from the first epoch's plan): its optimizer steps when
  // train.grad_accum = 1. 0 when the training split is empty.
  virtual int64_t steps_per_epoch(const config::RunConfig& cfg,
                                  const data::DataSplits& d) const = 0;
  // The run's length in steps, given the steps of an epoch.
  virtual int64_t total_steps(const config::RunConfig& cfg, int64_t per_epoch) const;
  // "1000 train / 100 valid examples": the summary line's sizes.
  virtual std::string split_sizes(const data::DataSplits& d) const = 0;

  // One validation on rank 0: writes its metrics.jsonl record, says its line, updates the best
  // score in st; true when it is the best so far.
  virtual bool validate(RunContext& c, train::TrainState& st) const = 0;
  // After training (rank 0): the held-out result, its record written; returns the line to say.
  virtual std::string final_result(TrainingRun& r, const train::TrainState& st,
                                   MetricsLog& metrics) const = 0;

  // What its runs can do beyond scoring and looking inside (run/capability.hpp): what its
  // Inference answers (Inference::capabilities) and the page offers (run facts' "capabilities").
  virtual std::vector<Capability> capabilities() const = 0;

  // The family's length rules, for any model of config c: what decoding, evaluation, the
  // position checks, the probe and the family's Inference all ask, each written once here.
  // The longest input model reads (its context, or its source positions).
  virtual int64_t max_input_tokens(const config::RunConfig& c, const nn::Model& model) const = 0;
  // The decode-length rule: the most output tokens for an input of n.
  virtual int64_t max_output_tokens(const config::RunConfig& c, int64_t n) const = 0;
  // The same rule when the decode is scored against a known target of `target` tokens (exact
  // match), framed by f; by default it is max_output_tokens(c, n).
  virtual int64_t scored_output_tokens(const config::RunConfig& c, const data::Framing& f,
                                       int64_t n, int64_t target) const;
  // The probe's room in model (config::ProbeRoom): its input positions, and for a family that
  // decodes the probe, the decoded tokens that must fit them too.
  virtual config::ProbeRoom probe_room(const config::RunConfig& c,
                                       const nn::Model& model) const = 0;
  // Refuses, naming probe.length, a [probe] length that model's room cannot hold.
  void check_probe_length(const config::RunConfig& c, const nn::Model& model) const;
  // The tokens one inspection of an input of n tokens puts through the model (inspect's work
  // bounds, inspect/work.hpp): the input, and what the family decodes from it.
  virtual int64_t inspection_tokens(const config::RunConfig& c, int64_t n) const = 0;
  // The first n inputs of d's split (valid, test or train) whose real pairs the probe reads
  // (cross-attention's alignment): an encoder-decoder's sources; none when no attention of the
  // family reads another sequence.
  virtual std::vector<data::Ids> probe_sources(const data::DataSplits& d, const std::string& split,
                                               int64_t n) const = 0;
  // The token stream an in-context-learning score reads windows of (inspect/icl.hpp): a
  // language model's validation text; null for a family whose model does not read one.
  virtual const data::Ids* icl_text(const data::DataSplits& d) const = 0;
  // What the training probe holds at once besides the model ([probe] on; run/limits.cpp
  // adds it to a run's estimate): its inspections' attention maps, and a pass of the family's
  // own (a language model's icl windows); tv: the output vocabulary.
  virtual MemoryEstimate probe_memory(const config::RunConfig& c, double tv) const = 0;
  // Whether a loaded run of config c must read its data to be used (or its saved vocabularies
  // suffice: a character language model samples with its vocabulary alone).
  virtual bool needs_data(const config::RunConfig& c) const = 0;
  // Whether the model reads the source vocabulary (a language model has no source side).
  virtual bool reads_source() const = 0;
  // What `qkv train --dry-run` says of r's training data, in its words.
  virtual DataPlan data_plan(const TrainingRun& r) const = 0;

  // One input through model as Inference::inspect passes it: a language model
  // reads it; an encoder-decoder decodes it greedily, then reads <bos> + its output
  // teacher-forced. That reading pass captures every attention pattern (an inner hook layer)
  // into the views, labelled by d's vocabularies. Runs in the caller's InferenceScope and under
  // the caller's hooks (an ablation stays in place; a capture of the caller's receives the
  // pass's values too); the model of config c and data d (the framing).
  virtual Inspection inspect(const nn::Model& model, const config::RunConfig& c,
                             const data::DataSplits& d, const data::Ids& input) const = 0;
  // The family's facts about a run for its page (serve's run_facts): the model described
  // ("model"), "capabilities" by name (write_capabilities) and the sizes
  // only it has (encoder_layers, block_size).
  virtual void describe(const config::RunConfig& c, nlohmann::json& facts) const = 0;

  // --- over a loaded run: the bodies of Inference's calls of the same names (run/inference.hpp
  // says what each returns). inf holds the run, its precision and its scope (inf.call()).
  // The ids of one typed input, read as the run's data was; qkv::Error naming op otherwise.
  virtual data::Ids encode(const Inference& inf, const std::string& text, const char* op) const = 0;
  virtual std::string text(const Inference& inf, const data::Ids& ids) const = 0;
  virtual std::vector<std::string> input_labels(const Inference& inf,
                                                const data::Ids& ids) const = 0;
  virtual std::vector<std::string> output_labels(const Inference& inf,
                                                 const data::Ids& ids) const = 0;
  virtual std::string output_name(const Inference& inf) const = 0;
  // The capabilities' calls, asked only when capabilities() lists them (Inference::require);
  // a family that lists one overrides its call (the defaults throw qkv::Error).
  virtual std::vector<data::Ids> decode(const Inference& inf, const std::vector<data::Ids>& inputs,
                                        const DecodeOptions& o) const;
  virtual void generate(const Inference& inf, const data::Ids& prompt, int64_t n,
                        const SampleOptions& o, Generator& gen, bool cached,
                        const std::function<void(int64_t)>& on_token) const;
  virtual std::vector<Classification> classify(const Inference& inf,
                                               const std::vector<data::Ids>& inputs) const;
  virtual Scores score(const Inference& inf, const ScoreOptions& o) const = 0;
  virtual void for_each_batch(const Inference& inf, const PassOptions& o,
                              const std::function<void(const BatchPass&)>& fn) const = 0;
  virtual int64_t pass_tokens(const Inference& inf, const PassOptions& o) const = 0;
  virtual Tensor logits(const Inference& inf, const data::Ids& input, const data::Ids& tgt_in,
                        nn::Hooks* hooks) const = 0;
  virtual Tensor batch_logits(const Inference& inf, const Tensor& input, const Tensor& tgt_in,
                              nn::Hooks* hooks, const Tensor& input_valid,
                              const Tensor& tgt_valid) const = 0;

 protected:
  // facts["capabilities"] = the names of capabilities() ("decode", "generate").
  void write_capabilities(nlohmann::json& facts) const;

  // What a family that trains on examples (pairs, classes) shares: this rank's loader over
  // d.train (or over each epoch's draw, `epochs`); the batches of its first epoch, `first`
  // (d.train, or epoch 0's draw), planned with a copy of the loader's generator; and the
  // summary line's sizes, "1000 train / 100 valid examples".
  static std::unique_ptr<data::BatchSource> examples_loader(const config::RunConfig& cfg,
                                                            const data::DataSplits& d, int rank,
                                                            int ranks, data::EpochData epochs = {});
  static int64_t examples_steps_per_epoch(const config::RunConfig& cfg, const data::DataSplits& d,
                                          const data::Dataset& first);
  static std::string examples_split_sizes(const data::DataSplits& d);
};

// The family of a data.task.
const Family& family_for(data::TaskKind kind);

}  // namespace qkv::run
