// What a training run has done so far: the Trainer advances it, hooks read and update it, and
// a checkpoint saves it (run/run.hpp writes it as state.json) so that a resumed run continues
// exactly as an uninterrupted one.
#pragma once
#include <cstdint>
#include <string>

#include "data/loader.hpp"

namespace qkv::train {

struct TrainState {
  int64_t step = 0;   // optimizer steps taken (skipped steps count too)
  int64_t epoch = 0;  // the loader's epoch after the last step
  data::LoaderState loader;
  uint64_t dropout_seed = 0, dropout_position = 0;
  double best_score = -1;    // the score of the best validation so far (higher is better)
  double best_loss = 1e300;  // its loss (breaks ties)
  int64_t evals_since_best = 0;
  uint64_t metrics_bytes = 0;  // metrics.jsonl length when the checkpoint was written
  int64_t ranks = 1;           // data-parallel processes (mpirun -np) that wrote it
  std::string best;            // name of the best checkpoint
  // The open log interval (steps since the last metrics record), so a resumed run logs the
  // same averages as an uninterrupted one.
  double log_loss_sum = 0, log_norm_sum = 0;
  int64_t log_count = 0;
};

}  // namespace qkv::train
