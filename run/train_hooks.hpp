// The run folder's hooks for the Trainer (train/trainer.hpp): what `qkv train` does around
// each step. They share a RunContext; the caller owns everything it refers to.
//
//   TrainLog       a metrics.jsonl record every train.log_every steps (and at the last):
//                  mean loss and gradient norm since the last record, lr, epoch
//   Validator      at each validation: loss / accuracy / exact match (BLEU, chrF for text), or
//                  the LM loss estimates; keeps the best (train.best_metric) and writes the
//                  checkpoint (every validation when checkpoint.every = 0, else the best only)
//   Checkpointer   checkpoint.every steps, at the end, on a non-finite step (the skip record,
//                  or the last good checkpoint named in the error)
//   StopOnSignal   SIGINT, SIGTERM, SIGHUP, or the caller's stop request: stop at the next step
//                  boundary with a checkpoint; a second signal ends the process at once.
//                  exit_code() = 128 + signal (a request: 130, as SIGINT).
//   DropoutPerRank data-parallel: rank r's dropout masks of step s come from a stream of
//                  (seed, r, s), so a resumed run draws the same (one process: nothing)
// Add them in this order (after any progress display): TrainLog, Validator, EarlyStopping,
// Checkpointer, StopOnSignal, DropoutPerRank.
//
// Data-parallel: rank 0 alone writes the run folder, validates and prints; its decisions (a
// better validation, evaluations since the best) are broadcast to the others.
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "config/config.hpp"
#include "data/config.hpp"
#include "nn/seq2seq.hpp"
#include "optim/optimizers.hpp"
#include "run/train_run.hpp"
#include "train/trainer.hpp"

namespace qkv::run {

// metrics.jsonl, appended one record per line and flushed, so a crash loses at most a line.
// Inactive (writes nothing, bytes() 0) when constructed with active = false (ranks other than 0).
// on_write, when given, sees each record once its line is flushed (an active log only).
class MetricsLog {
 public:
  using OnWrite = std::function<void(const nlohmann::json&)>;
  MetricsLog(const std::string& path, bool active, OnWrite on_write = nullptr);
  void write(const nlohmann::json& j);
  uint64_t bytes() const;

 private:
  std::string path_;
  bool active_;
  std::ofstream out_;
  OnWrite on_write_;
};

// What the hooks share: the run that trains (its folder, config, data, model, optimizer) and
// where its records and lines go.
struct RunContext {
  TrainingRun& run;
  MetricsLog& metrics;
  std::function<void(const std::string&)> say;  // a line for the user (not overwritten)
};

class TrainLog : public train::Hook {
 public:
  // show(step, loss, lr, tokens per second): every step (the mean loss and the throughput of
  // the interval on logged steps, else the step's loss and 0). extra: adds fields to a record.
  using Show = std::function<void(int64_t, double, double, double)>;
  using Extra = std::function<void(nlohmann::json&)>;
  TrainLog(RunContext& c, Show show, Extra extra = nullptr);
  void on_train_begin(train::Trainer&) override;
  void on_step_end(train::Trainer& t, const train::StepStats& s) override;

 private:
  RunContext& c_;
  Show show_;
  Extra extra_;
  int64_t tokens_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

class Checkpointer : public train::Hook {
 public:
  // saved_step: the step of the checkpoint the run resumed from (-1: none)
  Checkpointer(RunContext& c, int64_t saved_step);
  // Writes a checkpoint of this step (rank 0; every rank checks that the replicas agree).
  // Returns its name, or "" when none was written (other ranks; non-finite weights).
  std::string save(train::Trainer& t, bool is_best);
  int64_t saved_step() const { return saved_step_; }
  // After an interrupted run: the checkpoint of its last step ("" when none was written).
  const std::string& final_name() const { return final_name_; }
  void on_checkpoint(train::Trainer& t) override;
  std::string on_nonfinite(train::Trainer& t, const std::string& what, bool skipping) override;
  void on_train_end(train::Trainer& t, train::StopReason r) override;

 private:
  RunContext& c_;
  int64_t saved_step_;
  std::string final_name_;
};

class Validator : public train::Hook {
 public:
  // after: called on every rank at the end of each validation (e.g. to redraw loss.svg)
  Validator(RunContext& c, Checkpointer& ckpt, std::function<void()> after = nullptr);
  void on_validate(train::Trainer& t) override;
  void on_train_end(train::Trainer& t, train::StopReason r) override;

 private:
  RunContext& c_;
  Checkpointer& ckpt_;
  std::function<void()> after_;
};

// What stops a run besides its end: the process's signals, and the caller's request.
struct StopSources {
  bool signals = true;              // install handlers for SIGINT, SIGTERM, SIGHUP (left installed)
  std::function<bool()> requested;  // polled at each step boundary: true stops as SIGINT does
};

class StopOnSignal : public train::Hook {
 public:
  StopOnSignal(RunContext& c, const Checkpointer& ckpt, StopSources sources = {})
      : c_(c), ckpt_(ckpt), sources_(std::move(sources)) {}
  void on_train_begin(train::Trainer&) override;  // installs the handlers (sources.signals)
  bool should_stop(train::Trainer&) override;
  void on_train_end(train::Trainer& t, train::StopReason r) override;  // the "interrupted" line
  int exit_code() const;  // 128 + the signal; a request: 130 (as SIGINT)

 private:
  bool signalled() const;  // a handled signal arrived (sources.signals)
  RunContext& c_;
  const Checkpointer& ckpt_;
  StopSources sources_;
  bool by_request_ = false;  // the stop came from sources.requested, no signal
};

class DropoutPerRank : public train::Hook {
 public:
  explicit DropoutPerRank(RunContext& c) : c_(c) {}
  void on_step_begin(train::Trainer& t) override;

 private:
  RunContext& c_;
};

}  // namespace qkv::run
