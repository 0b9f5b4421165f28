// A training run as `qkv train` starts it: the run folder (new, or resumed from its latest
// checkpoint), the data, model, optimizer, loader and schedule built from its config, and the
// Trainer options. The caller then adds the hooks of run/train_hooks.hpp and calls fit().
//
// Order: open_training_run (checks, reads and builds; no file written) -> the distributed
// context -> prepare_run_folder (rank 0 creates or repairs the folder, after a barrier).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "data/config.hpp"
#include "data/loader.hpp"
#include "nn/seq2seq.hpp"
#include "optim/optimizers.hpp"
#include "run/family.hpp"
#include "run/run.hpp"
#include "runfolder/run_lock.hpp"
#include "train/trainer.hpp"

namespace qkv::run {

struct TrainRunArgs {
  std::string config, run_dir, resume;                         // resume: the run folder to continue
  std::vector<std::pair<std::string, std::string>> overrides;  // ("model.d_model", "256")
  bool overwrite = false;  // a new run replaces the run folder's old one (after taking its lock)
  bool dry_run = false;    // read and build everything, take no lock, write nothing
  // The config's TOML itself, read instead of the file `config`, which then only names it (in
  // messages, and runs/<its stem> by default; "": "config.toml").
  std::string config_text = "";
};

// A run being trained: its parts (folder, config, data, model) and what training adds.
struct TrainingRun : RunParts {
  std::optional<RunLock> lock;  // held while this process writes the run folder
  bool resuming = false;        // --resume
  std::string resume_from;      // the checkpoint resumed ("" for a new run)
  bool restart = false;         // --resume of a run killed before its first checkpoint
  bool replace = false;         // --overwrite of a folder that holds an old run
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<data::BatchSource> loader;
  int64_t per_epoch = 0;  // steps per epoch, from the first epoch's plan
  // options.precision: cfg.precision resolved (auto: what it picked), the one copy
  train::TrainerOptions options;
  train::TrainState state;  // the resumed checkpoint's, or a new run's
};

// Reads the config (or the run folder's), checks memory and positions, loads the data and
// builds the model, optimizer and this rank's loader; resumes the checkpoint's state. Writes
// nothing. rank, ranks: this process among the data-parallel ones.
void open_training_run(TrainingRun& r, const TrainRunArgs& a, int rank, int ranks);
// Rank 0: repairs a resumed folder (metrics.jsonl, half-written checkpoints, the "best"
// pointer) or creates a new one (lock, config.toml, vocabularies, SentencePiece models).
// Every rank calls it (a barrier first: all have read the folder before rank 0 changes it).
void prepare_run_folder(TrainingRun& r, train::Distributed& dist);
// The new run folder prepare_run_folder made in this process (a new run, or --overwrite),
// removed again unless it holds a checkpoint (which --resume continues): a folder that did not
// exist goes, one that did keeps only its .lock, so the same command runs again. For a command
// that fails before its run has anything to keep: an allocation that failed anywhere, or an
// error before the first step. Never throws; the folder it removed, "" when none.
std::string discard_unfinished_run();

namespace testing {
// Runs in qkv train once the run folder is ready, before its hooks are made: the tests'
// failing allocation (tests/support/alloc_fault.cpp). None by default.
void set_after_folder(std::function<void()> hook);
void after_folder();
}  // namespace testing

// checkpoint.average_last = N > 0 (rank 0, after training): averages the run's last N
// checkpoints (fewer if it wrote fewer) into checkpoints/average and loads it into r.model.
// Returns what it averaged ("average of the last 5 checkpoints"), "" when off.
std::string load_final_average(TrainingRun& r);
// The weights a final test reads: checkpoint.average_last's average when on, else the best
// checkpoint (when there is one), loaded into r.model. Returns which ("best checkpoint").
std::string load_final_weights(TrainingRun& r);
// The first line of the run: what it trains, how long, on how many threads and processes.
std::string run_summary(const TrainingRun& r, int ranks);

}  // namespace qkv::run
