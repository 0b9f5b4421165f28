// What train, eval and translate share: a run folder, its model, data and checkpoints.
// Decoding and evaluation: run/decode.hpp; what consumers call: run/inference.hpp; the folder's
// storage (checkpoints, lock, checksums, provenance): runfolder/.
//
// A run folder:
//   config.toml                 the effective config (runs again as is)
//   src_vocab.txt tgt_vocab.txt the vocabularies, one token per line
//   metrics.jsonl               one JSON object per logged step and per validation
//   loss.svg                    training and validation loss against steps
//   checkpoints/                step-N folders and their pointers (runfolder/checkpoints.hpp)
//   .lock                       held by the one process writing the run (runfolder/run_lock.hpp)
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
#include "run/family.hpp"
#include "runfolder/checkpoints.hpp"

namespace qkv::run {

// From a mean cross-entropy in nats per token: the perplexity exp(loss), and the bits per
// token loss / ln 2 (bits per character for a character vocabulary).
double perplexity(double nats_per_token);
double bits_per_token(double nats_per_token);

// Model config with the vocabulary sizes of the data filled in.
nn::ModelConfig model_config(const config::RunConfig& c, const data::DataSplits& d);

// What every command has of a run: its folder, its config, its data and its model. A loaded
// run (LoadedRun) and a training one (run/train_run.hpp's TrainingRun) are this and what each
// adds, under the same names from config to kernel.
struct RunParts {
  std::string dir;  // the run folder, as given
  config::RunConfig config;
  data::DataSplits data;
  std::unique_ptr<nn::Model> model;  // the family's (Family::make_model)
  const Family& family() const { return family_for(config.data.task); }  // of data.task
};

// A trained run, ready to evaluate or translate: its config, data, vocabularies and model
// loaded from the best checkpoint (else the latest).
struct LoadedRun : RunParts {
  std::string checkpoint;  // the folder its weights were read from
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
