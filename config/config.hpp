// RunConfig: everything a training run is made of, read from a TOML file plus command-line
// overrides, validated, and written back as the run's effective config.
//
//   seed = 1            # model init, dropout, data generation and shuffling
//   threads = 0         # 0: all cores
//   precision = "fp32"  # the linear layers' products: fp32, bf16 or auto (core/precision.hpp)
//   [model]  nn::ModelConfig        [data]  data::DataConfig
//   [train]  TrainOptions           [optim] optim::OptimSection (optimizer, schedule, clipping)
//   [checkpoint] CheckpointOptions
//   [probe]  ProbeOptions: per-head scores recorded while the model trains
//
// Precedence: defaults < file < command line (--section.key VALUE). Unknown keys and values
// of the wrong type are errors naming the key and where it came from ("FILE:LINE" or
// "command line").
#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/document.hpp"
#include "core/precision.hpp"
#include "data/config.hpp"
#include "nn/seq2seq.hpp"
#include "optim/config.hpp"

namespace qkv::config {

// What makes a validation the best (and its checkpoint "best"): exact_match (ties: lower
// loss), bleu (greedy, text tasks; ties: lower loss) or loss.
enum class BestMetric { exact_match, bleu, loss };
inline constexpr EnumName<BestMetric> kBestMetricNames[] = {
    {"exact_match", BestMetric::exact_match},
    {"bleu", BestMetric::bleu},
    {"loss", BestMetric::loss}};
constexpr std::span<const EnumName<BestMetric>> names_of(BestMetric) { return kBestMetricNames; }

struct TrainOptions {
  int64_t epochs = 10;
  int64_t max_steps = 0;  // > 0: stop after this many steps even mid-epoch
  double label_smoothing = 0.0;
  int64_t log_every = 50;         // steps between log lines / metrics records
  int64_t eval_every = 0;         // steps between validations (0: once per epoch)
  int64_t eval_examples = 0;      // validate on at most this many examples (0: all)
  int64_t max_decode_extra = 10;  // greedy decoding stops at source length + this
  int64_t early_stopping = 0;     // stop after this many validations without improvement (0: off)
  bool log_attention_entropy = false;  // log mean attention entropy per layer
  bool skip_nonfinite = false;         // skip a step whose loss is NaN/Inf instead of stopping
  int64_t eval_iters = 200;            // data.task = "lm": batches per split of each loss estimate
  // Micro-batches per optimizer step: each of data.batch_size (or data.max_tokens), their
  // gradients summed and the loss a mean over all their tokens, as one batch K times larger.
  // Steps (max_steps, log_every, eval_every, the schedule) count optimizer steps.
  int64_t grad_accum = 1;
  BestMetric best_metric = BestMetric::exact_match;
};

struct CheckpointOptions {
  int64_t every = 0;  // steps between checkpoints (0: at each validation)
  int64_t keep = 2;   // most recent checkpoints kept (the best is kept as well)
  // > 0: after training, the last N checkpoints are averaged into checkpoints/average, which
  // the final test evaluates (runfolder/average.hpp); needs keep >= N. 0: off.
  int64_t average_last = 0;
};

// [probe]: every `every` steps (and at step 0 of a new run and at its last step) the heads'
// pattern scores, as `qkv heads` computes them (inspect/head_table.hpp), and a language
// model's in-context-learning score go to metrics.jsonl (inspect/probe_hook.hpp). The probe's
// inputs are drawn once from `seed`; it changes nothing the training computes.
struct ProbeOptions {
  int64_t every = 0;         // steps between probes (0: off)
  int64_t sequences = 4;     // repeated random token sequences (and examples for alignment)
  int64_t length = 0;        // the repeated half L (0: up to 16, within the model's positions)
  uint64_t seed = 1;         // the probe's tokens
  int64_t icl_windows = 16;  // data.task = "lm": validation windows of the icl score
};
// The probe's upper bounds (validate refuses more): as many sequences as `qkv heads --probes`
// takes, a repeated half as long as `qkv translate --max-input`'s default input. What they
// allocate together (every sequence's attention maps, the icl windows' logits) is in the
// training's memory estimate (run/limits.hpp).
inline constexpr int64_t kMaxProbeSequences = 1000;
inline constexpr int64_t kMaxProbeLength = 512;
inline constexpr int64_t kMaxIclWindows = 1000;

struct RunConfig {
  uint64_t seed = 1;
  int64_t threads = 0;
  Precision precision = Precision::fp32;
  nn::ModelConfig model;
  data::DataConfig data;
  TrainOptions train;
  optim::OptimSection optim;
  CheckpointOptions checkpoint;
  ProbeOptions probe;
  std::string name = "run";  // the config file's stem: default run folder runs/<name>

  void validate() const;  // every section; errors name the key
};

// The probe's length rule, one implementation for [probe] length (run::Family::
// check_probe_length, before a run's folder exists) and the repeated rows of `qkv heads` and the
// training probe (inspect/head_table.cpp), in the room the run's family gives
// (run::Family::probe_room): the repeated half L is read as an input of 2 L tokens within the
// model's input positions; a family that decodes it (decode_extra set) then decodes up to
// 2 L + decode_extra tokens after <bos> within the same positions, 2 L + decode_extra + 1 of them.
struct ProbeRoom {
  int64_t positions = 0;                // the most input tokens the model reads
  std::string positions_name;           // what sets them, for messages: "data.block_size"
  std::optional<int64_t> decode_extra;  // an encoder-decoder: train.max_decode_extra
};
// The longest L that fits (< 1: none does).
int64_t longest_probe_length(const ProbeRoom& r);
// qkv::Error "<key>: the probe's 2 x L = ..." saying what it is more than, when L does not fit.
void check_probe_length(int64_t L, const ProbeRoom& r, const std::string& key);

// overrides: ("model.d_model", "256") pairs from the command line.
RunConfig load_config(const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& overrides = {});
// From a parsed config (tests, and the effective config of a run).
RunConfig config_from_toml(const ConfigDoc& doc,
                           const std::vector<std::pair<std::string, std::string>>& overrides = {});
// The effective config, every key, as TOML text that load_config reads back to the same config.
std::string effective_toml(const RunConfig& c);

// Splits "--section.key VALUE" / "--section.key=VALUE" arguments out of args; throws on an
// option without a value. Other arguments are left in args.
std::vector<std::pair<std::string, std::string>> take_overrides(std::vector<std::string>& args);

}  // namespace qkv::config
