// The training loop as a library: one implementation of a training step, and hooks for
// everything around it (logging, validation, checkpoints, early stopping, a progress bar,
// interrupts), in the style of Keras `fit` callbacks and dlib's dnn_trainer.
//
// A step (Trainer::step):
//   forward   the ForwardFn: draws its batch and returns a scalar loss Var (this process's
//             share of the batch's mean loss; undefined when this process has no rows)
//   backward  loss.backward()
//             (grad_accum = K > 1: forward and backward K times, one micro-batch each, their
//             gradients summed; each micro-batch's loss is weighted by its loss_tokens and the
//             sum divided by theirs, so the step's loss and gradients are those of one batch
//             of the K micro-batches' rows: the mean over all their tokens)
//   agree     the loss summed over processes, and "stop?" (Distributed::agree)
//   reduce    gradients summed over processes (Distributed::reduce_gradients)
//   clip      clip_grad_norm (or only measure the norm), then clip_grad_value
//   schedule  the learning rate of this step (optim::apply_schedule), when one is given
//   update    optimizer.step() (in options.precision), optimizer.zero_grad()
// A non-finite loss, or an anomaly-mode finding (ag::anomaly_mode()) in forward or backward,
// skips the step (options.skip_nonfinite: no update, gradients dropped) or stops the run with
// qkv::Error "train: step N: WHAT; stopping (NOTES)", the notes coming from the hooks.
//
// Hook order in fit():
//   on_train_begin
//   per step:   on_step_begin (state().step is already the step being taken)
//               [forward] should_stop (polled; the answer is agreed over processes)
//               on_nonfinite (only on a non-finite loss or anomaly; then the step ends here)
//               [backward ... update] on_step_end(stats)
//               on_validate, when step % eval_every == 0 or it is the last step; a hook may
//                 call request_stop(StopReason::early_stopping) here (EarlyStopping does)
//               on_checkpoint, when checkpoint_every > 0 and step % checkpoint_every == 0
//               should_stop (polled again when the process decides alone), and the loop ends
//                 with StopReason::requested when a hook asked
//   on_validate once more when the run completed and its last step was not validated
//   on_train_end(reason)
// Hooks are called in the order they were added.
//
// A model of one's own (any forward that gives a scalar loss):
//   auto opt = optim::make_optimizer(optim_config, params);
//   train::TrainerOptions o;
//   o.total_steps = 1000;
//   o.eval_every = 100;
//   train::Trainer trainer(params, *opt, [&] { return train::Forward{my_loss(next_batch())}; }, o);
//   train::Callbacks log;
//   log.step_end = [](train::Trainer&, const train::StepStats& s) { print(s.step, s.loss); };
//   log.validate = [&](train::Trainer& t) { ... t.state().evals_since_best ... };
//   train::EarlyStopping early(5);
//   trainer.add_hook(log);
//   trainer.add_hook(early);
//   trainer.fit();
// A qkv::nn::Seq2Seq on a data::BatchSource: train::Seq2SeqStep (train/seq2seq_step.hpp) is
// the ForwardFn. The run folder's hooks (metrics, validation, checkpoints, signals) are in
// run/train_hooks.hpp.
//
// Ownership: the Trainer holds references to the optimizer, the hooks, the loader and the
// distributed context, and copies of the parameter handles (ag::Var shares storage); the
// caller keeps all of them alive while the Trainer is used. The model itself is the caller's:
// the Trainer sees it only through the ForwardFn and the parameter list.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include "core/precision.hpp"

#include "autograd/var.hpp"
#include "data/loader.hpp"
#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"
#include "train/distributed.hpp"
#include "train/state.hpp"

namespace qkv::train {

// What one forward gives.
struct Forward {
  ag::Var loss;        // scalar; undefined: this process had no rows this step (loss 0)
  int64_t tokens = 0;  // tokens the step processed over all processes (for throughput)
  // The tokens the loss is a mean over, over all processes (grad_accum weights micro-batches
  // by it); 0: not known, every micro-batch then weighs the same.
  int64_t loss_tokens = 0;
};
using ForwardFn = std::function<Forward()>;

struct StepStats {
  int64_t step = 0;
  double loss = 0;       // the global loss of the step (summed over processes)
  double grad_norm = 0;  // global gradient norm before clipping (0 if not measured)
  double lr = 0;         // the learning rate the update used
  int64_t tokens = 0;
};

struct TrainerOptions {
  int64_t total_steps = 0;       // fit() runs until state().step == total_steps
  int64_t eval_every = 0;        // on_validate every this many steps (0: only at the end)
  int64_t checkpoint_every = 0;  // on_checkpoint every this many steps (0: never)
  double clip_norm = 0;          // > 0: clip the global gradient norm to this
  double clip_value = 0;         // > 0: clip every gradient element to [-v, v]
  std::optional<optim::ScheduleConfig> schedule;  // none: the optimizer's own lr throughout
  bool skip_nonfinite = false;    // skip a step with a non-finite loss instead of stopping
  bool measure_grad_norm = true;  // false: no norm pass when not clipping (stats.grad_norm 0)
  int64_t grad_accum = 1;         // micro-batches (forward calls) per optimizer step
  // The products' precision (core/precision.hpp; fp32 or bf16, resolved): each step's forward
  // and backward run in one PrecisionScope, so the weights' bf16 copies are made once per
  // step, before the optimizer updates the float32 weights; the update runs in a scope of its
  // own with the same precision (Muon's Newton-Schulz products follow it, optim/muon.hpp).
  Precision precision = Precision::fp32;
};

enum class StopReason { completed, early_stopping, requested };

class Trainer;

// Override what you need; every default does nothing.
class Hook {
 public:
  virtual ~Hook() = default;
  virtual void on_train_begin(Trainer&) {}
  virtual void on_step_begin(Trainer&) {}
  virtual void on_step_end(Trainer&, const StepStats&) {}
  // skipping: the step is skipped (else the run stops with an error); the returned text, if
  // any, is added to the error message (e.g. the last good checkpoint).
  virtual std::string on_nonfinite(Trainer&, const std::string& /*what*/, bool /*skipping*/) {
    return {};
  }
  virtual void on_validate(Trainer&) {}
  virtual void on_checkpoint(Trainer&) {}
  virtual bool should_stop(Trainer&) { return false; }
  virtual void on_train_end(Trainer&, StopReason) {}
};

// A hook from lambdas, for short programs: set the members you need.
struct Callbacks : Hook {
  std::function<void(Trainer&, const StepStats&)> step_end;
  std::function<void(Trainer&)> validate;
  std::function<bool(Trainer&)> stop;
  std::function<void(Trainer&, StopReason)> train_end;
  void on_step_end(Trainer& t, const StepStats& s) override {
    if (step_end) step_end(t, s);
  }
  void on_validate(Trainer& t) override {
    if (validate) validate(t);
  }
  bool should_stop(Trainer& t) override { return stop && stop(t); }
  void on_train_end(Trainer& t, StopReason r) override {
    if (train_end) train_end(t, r);
  }
};

// Stops the run after `patience` validations in a row without improvement, counted in
// state().evals_since_best (kept by the hook that validates; 0: never).
class EarlyStopping : public Hook {
 public:
  explicit EarlyStopping(int64_t patience) : patience_(patience) {}
  void on_validate(Trainer& t) override;

 private:
  int64_t patience_;
};

class Trainer {
 public:
  // params: what the optimizer updates (clipping and the gradient reduction see these).
  // dist: nullptr for one process.
  Trainer(std::vector<ag::Var> params, optim::Optimizer& optimizer, ForwardFn forward,
          TrainerOptions options = {}, Distributed* dist = nullptr);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void add_hook(Hook& hook) { hooks_.push_back(&hook); }
  // state().loader and state().epoch follow this loader once each step has drawn its batch
  // (skipped steps too): the one copy of the loader's position, which checkpoints save.
  void set_loader(data::BatchSource* loader) { loader_ = loader; }

  // Steps until total_steps, or until a hook stops the run.
  StopReason fit();
  // One training step (see the top of this file), without validation or checkpoints: for
  // benchmarks and custom loops. Returns nullopt when the step was skipped. stop, if given,
  // receives the agreed answer of the hooks' should_stop.
  std::optional<StepStats> step(bool* stop = nullptr);

  // Called by hooks (on_validate) to end the run after this step.
  void request_stop(StopReason reason) { requested_ = reason; }

  TrainState& state() { return state_; }
  const TrainState& state() const { return state_; }
  const TrainerOptions& options() const { return options_; }
  optim::Optimizer& optimizer() { return optimizer_; }
  const std::vector<ag::Var>& params() const { return params_; }
  Distributed& dist() { return *dist_; }

 private:
  bool poll_stop();
  bool handle_nonfinite(const std::string& what);
  bool handle_error(const Error& e);
  void follow_loader();  // state_.loader and state_.epoch from loader_ (when set)
  StepStats update(double loss, int64_t tokens);
  struct Accumulated {
    double loss = 0;     // this process's share of the step's loss
    int64_t tokens = 0;  // for throughput
  };
  // The forward and backward passes of one step (grad_accum micro-batches); nullopt when an
  // anomaly-mode finding skips the step. The loss is agreed over processes afterwards.
  std::optional<Accumulated> accumulate();
  bool validation_step(int64_t step) const;

  std::vector<ag::Var> params_;
  optim::Optimizer& optimizer_;
  ForwardFn forward_;
  TrainerOptions options_;
  SingleProcess single_;
  Distributed* dist_;
  data::BatchSource* loader_ = nullptr;
  std::vector<Hook*> hooks_;
  TrainState state_;
  std::optional<StopReason> requested_;
};

}  // namespace qkv::train
