// What train, eval and translate share: a run folder, its model, data and checkpoints.
// Decoding and evaluation: run/decode.hpp; what consumers call: run/inference.hpp.
//
// A run folder:
//   config.toml                 the effective config (runs again as is)
//   src_vocab.txt tgt_vocab.txt the vocabularies, one token per line
//   metrics.jsonl               one JSON object per logged step and per validation
//   loss.svg                    training and validation loss against steps
//   checkpoints/step-00001200/  model.safetensors, optim.safetensors, state.json,
//                               metrics.jsonl (the log so far), manifest.json (checksums)
//   .lock                       held by the one process writing the run (run/run_lock.hpp)
//   checkpoints/latest, best    the name of the newest and the best checkpoint
// Every file is written atomically (temporary file, fsync, rename); a checkpoint folder is
// complete before it gets its name, so a crash at any moment leaves the last good one.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/config.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/seq2seq.hpp"
#include "optim/optimizers.hpp"
#include "run/checkpoint_selector.hpp"
#include "run/family.hpp"
#include "train/state.hpp"

namespace qkv::run {

// From a mean cross-entropy in nats per token: the perplexity exp(loss), and the bits per
// token loss / ln 2 (bits per character for a character vocabulary).
double perplexity(double nats_per_token);
double bits_per_token(double nats_per_token);

// Model config with the vocabulary sizes of the data filled in.
nn::ModelConfig model_config(const config::RunConfig& c, const data::DataSplits& d);

// --- checkpoints ---
// The training state a checkpoint saves (train/state.hpp).
using TrainState = train::TrainState;

// Writes checkpoints/step-N atomically, points "latest" at it, removes old ones beyond keep
// (never the best), and points "best" at it when is_best.
std::string save_checkpoint(const std::string& run_dir, const nn::Model& model,
                            const optim::Optimizer& opt, const TrainState& st, int64_t keep,
                            bool is_best);
// The names of run_dir's complete step-* checkpoint folders (model, optimizer and state
// written), oldest first; empty when there is none.
std::vector<std::string> step_checkpoints(const std::string& run_dir);
// The checkpoint "latest" (or "best") names; falls back to the newest complete step-* folder.
// Empty when there is none.
std::string find_checkpoint(const std::string& run_dir, const std::string& which = "latest");
// The checkpoint folder `which` names (run/checkpoint_selector.hpp): best, latest (each falling
// back to the newest complete checkpoint), average (run/average.hpp), a step-N folder's name,
// or the path of a checkpoint folder; an error naming --checkpoint when it is not there.
std::string resolve_checkpoint(const std::string& run_dir, const CheckpointSelector& which);
// The same, parsed from its text (parse_checkpoint_selector's error for a bad one).
std::string resolve_checkpoint(const std::string& run_dir, const std::string& which);
// Loads model weights (and, when opt is non-null, the optimizer state) and returns the state.
// Files are verified against the checkpoint's manifest.json, weights must be finite
// (run/integrity.hpp); errors name the damaged file.
TrainState load_checkpoint(const std::string& ckpt_dir, nn::Model& model, optim::Optimizer* opt);

// A trained run, ready to evaluate or translate: its config, data, vocabularies and model
// loaded from the best checkpoint (else the latest).
struct LoadedRun {
  config::RunConfig config;
  data::DataSplits data;
  std::unique_ptr<nn::Model> model;  // the task's: nn::Seq2Seq or nn::DecoderLM
  std::string checkpoint;
  std::string dir;                                                // the run folder, as given
  const Family& family() const { return family_for(config.data.task); }  // the family of data.task
  // The model as its family's type; qkv::Error naming op for the other family.
  const nn::Seq2Seq& seq2seq(const char* op) const { return nn::model_as<nn::Seq2Seq>(*model, op); }
  const nn::DecoderLM& lm(const char* op) const { return nn::model_as<nn::DecoderLM>(*model, op); }
};
LoadedRun load_run(const std::string& run_dir, const CheckpointSelector& which);
LoadedRun load_run(const std::string& run_dir, const std::string& which = "best");

// True for the generated tasks (copy, reverse, sort...), whose text is symbols separated by
// spaces; false for text tasks (dates, tsv), which go through the run's tokenizer.
bool is_symbol_task(const data::DataConfig& dc);
// One user-typed input as source ids, read as the run's data was: lowercased (UTF-8) when
// data.lowercase, then split into the task's symbols or tokenized. An unknown symbol or an
// empty input throws qkv::Error naming `op` (the subcommand).
data::Ids encode_source(const LoadedRun& r, const std::string& text, const std::string& run_dir,
                        const char* op);

}  // namespace qkv::run
