// qkv train CONFIG [--run-dir DIR] [--section.key VALUE ...]   |   qkv train --resume DIR
//
// The command line's face of training::train (training/train.hpp), which does the whole run:
// the run folder, the Trainer with its hooks, the probe, the progress bar, the final test and
// loss.svg. Here: the arguments as a request, the process's signals, the exit code.
//
// Under `mpirun -np N` this trains data-parallel (docs/distributed.md): every rank holds the
// same model, takes its shard of the same global batch and sums gradients with the others
// (dist::Context); rank 0 alone writes the run folder, validates and prints.
#include "training/train.hpp"
#include "apps/commands.hpp"

namespace qkv::app {

int cmd_train(const TrainArgs& a) {
  training::TrainRequest req;
  req.config = a.config;
  req.run_dir = a.run_dir;
  req.resume = a.resume;
  req.overrides = a.overrides;
  req.overwrite = a.overwrite;
  req.quiet = a.quiet;
  req.verbose = a.verbose;
  // SIGINT, SIGTERM, SIGHUP: a checkpoint, then exit 128 + the signal (apps/main.cpp)
  req.handle_signals = true;
  return training::train(req).exit_code;
}

}  // namespace qkv::app
