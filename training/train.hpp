// Training a run folder as one call: what `qkv train` does, for every caller (the qkv binary's
// train subcommand, the Python module, a program of one's own), so each gets the same run
// folder bit for bit.
//
//   training::TrainRequest req;
//   req.config = "configs/copy.toml";
//   req.run_dir = "runs/copy-short";
//   req.overrides = {{"train.max_steps", "300"}};      // as `--train.max_steps 300`
//   training::StopToken stop;                          // stop.request() from any thread
//   training::TrainCallbacks cb;
//   cb.on_record = [](const nlohmann::json& j) { ... };  // each metrics.jsonl record
//   cb.stop = &stop;
//   training::TrainResult r = training::train(req, cb);
//
// One call: open_training_run (run/train_run.hpp: config, data, model; no file written), the
// [probe]'s inputs (inspect/probe_hook.hpp), prepare_run_folder, the Trainer (train/trainer.hpp)
// with the run folder's hooks (run/train_hooks.hpp) and the probe, fit(), then the final test
// and loss.svg. A new run's folder that fails before its first step is removed again
// (run::discard_unfinished_run), so the same call can run again; errors are qkv::Error.
//
// Stopping: a StopToken's request, a true should_stop, or (handle_signals) SIGINT, SIGTERM,
// SIGHUP all end the run at the next step boundary with a checkpoint of that step, which
// `qkv train --resume` (TrainRequest::resume) continues to exactly the uninterrupted result.
// A request stops as SIGINT does: StopReason::requested, exit code 130.
//
// Data-parallel (under mpirun, run/distributed.hpp): every rank calls train() with the same
// request; rank 0 alone writes the folder, validates, probes, prints and calls on_record. A stop
// is agreed over the ranks (any rank's stops all).
//
// Process-wide effects, as in `qkv train`: the config's thread count is applied (OpenMP), and
// handle_signals installs signal handlers that stay installed after the call.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "train/trainer.hpp"

namespace qkv::training {

struct TrainRequest {
  std::string config;  // a config file (a new run); "" with resume
  // The config's TOML itself, instead of reading the file `config`, which then only names it
  // (in messages, and runs/<its stem> by default; "": "config.toml")
  std::string config_text;
  std::string run_dir;  // a new run's folder ("": runs/<config name>)
  std::string resume;   // a run folder to continue from its last checkpoint ("": a new run)
  // ("section.key", "value") as `--section.key value` gives them: values are TOML, else text
  std::vector<std::pair<std::string, std::string>> overrides;
  bool overwrite = false;       // a new run replaces the run folder's old one
  bool quiet = false;           // only warnings and errors on stderr
  bool verbose = false;         // a progress line every step
  bool handle_signals = false;  // SIGINT, SIGTERM, SIGHUP stop the run (the qkv binary: true)
};

// A stop asked from any thread: the run stops at its next step boundary as on SIGINT.
class StopToken {
 public:
  void request() { requested_.store(true); }
  bool requested() const { return requested_.load(); }

 private:
  std::atomic<bool> requested_{false};
};

// Every member is optional; all are called on the thread that called train().
struct TrainCallbacks {
  // Each record as it is appended to metrics.jsonl (and flushed), in the file's order: the
  // training records, validations, the probe's, a skipped step's, the final test's. An
  // exception thrown here ends the run as a failed step does (no checkpoint of it).
  std::function<void(const nlohmann::json&)> on_record;
  // Polled at every step (at least once): true stops the run at that step's end as stop does.
  std::function<bool()> should_stop;
  const StopToken* stop = nullptr;  // the caller's; outlives the call
};

struct TrainResult {
  train::StopReason reason = train::StopReason::completed;
  int exit_code = 0;       // qkv train's: 0, or 128 + the signal (130: SIGINT or a stop request)
  int64_t step = 0;        // the last step taken
  std::string run_dir;     // the run folder
  std::string checkpoint;  // interrupted: the checkpoint of its last step ("": none written)
  std::string final_line;  // the final test's line ("" when interrupted, or not rank 0)
};

TrainResult train(const TrainRequest& request, const TrainCallbacks& callbacks = {});

}  // namespace qkv::training
