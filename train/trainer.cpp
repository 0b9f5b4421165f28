#include "train/trainer.hpp"

#include <cmath>
#include <sstream>

#include "autograd/ops.hpp"
#include "core/error.hpp"
#include "optim/clip.hpp"

namespace qkv::train {

void EarlyStopping::on_validate(Trainer& t) {
  if (patience_ > 0 && t.state().evals_since_best >= patience_)
    t.request_stop(StopReason::early_stopping);
}

Trainer::Trainer(std::vector<ag::Var> params, optim::Optimizer& optimizer, ForwardFn forward,
                 TrainerOptions options, Distributed* dist)
    : params_(std::move(params)),
      optimizer_(optimizer),
      forward_(std::move(forward)),
      options_(std::move(options)),
      dist_(dist != nullptr ? dist : &single_) {
  QKV_CHECK(static_cast<bool>(forward_), "Trainer", "no forward function given");
  QKV_CHECK(options_.total_steps >= 0 && options_.eval_every >= 0 && options_.checkpoint_every >= 0,
            "Trainer", "total_steps, eval_every and checkpoint_every must be >= 0, got ",
            options_.total_steps, ", ", options_.eval_every, ", ", options_.checkpoint_every);
  QKV_CHECK(options_.grad_accum >= 1, "train.grad_accum", "must be >= 1, got ",
            options_.grad_accum);
}

bool Trainer::poll_stop() {
  bool stop = false;
  for (Hook* h : hooks_) stop = h->should_stop(*this) || stop;  // every hook is asked
  return stop;
}

// Returns true: skip the step; otherwise throws.
bool Trainer::handle_nonfinite(const std::string& what) {
  const bool skip = options_.skip_nonfinite;
  std::string notes;
  for (Hook* h : hooks_) {
    const std::string note = h->on_nonfinite(*this, what, skip);
    if (!note.empty()) notes += (notes.empty() ? "" : "; ") + note;
  }
  if (skip) {
    optimizer_.zero_grad();  // anomaly mode may stop backward half-way
    return true;
  }
  std::ostringstream msg;
  msg << "train: step " << state_.step << ": " << what << "; stopping";
  if (!notes.empty()) msg << " (" << notes << ")";
  throw Error(msg.str());
}

// Anomaly mode's findings are about the numbers; any other error is a real one (rethrown by
// the caller). A finding is this process's alone: with several processes it stops them all (a
// skip on one would leave the others waiting in a collective).
bool Trainer::handle_error(const Error& e) {
  const std::string msg = e.what();
  if (!ag::anomaly_mode() || msg.rfind("anomaly: ", 0) != 0) return false;
  if (!dist_->decides_alone())
    throw Error("train: step " + std::to_string(state_.step) + ": " + msg + "; stopping");
  return handle_nonfinite(msg);
}

void Trainer::follow_loader() {
  if (loader_ == nullptr) return;
  state_.loader = loader_->state();
  state_.epoch = state_.loader.epoch;
}

// After backward: the gradient reduction, clipping, the schedule and the update.
StepStats Trainer::update(double loss, int64_t tokens) {
  dist_->reduce_gradients();
  StepStats s;
  s.step = state_.step;
  s.loss = loss;
  s.tokens = tokens;
  if (options_.clip_norm > 0)
    s.grad_norm = optim::clip_grad_norm(params_, options_.clip_norm);
  else if (options_.measure_grad_norm)
    s.grad_norm = optim::grad_norm(params_);
  if (options_.clip_value > 0) optim::clip_grad_value(params_, options_.clip_value);
  s.lr =
      options_.schedule ? optim::apply_schedule(optimizer_, *options_.schedule) : optimizer_.lr();
  {
    // The run's precision reaches the optimizer's own products too (Muon's Newton-Schulz), in a
    // scope of their own: the step's ended before the weights change.
    const PrecisionScope precision(options_.precision);
    optimizer_.step();
  }
  optimizer_.zero_grad();
  return s;
}

// grad_accum = K > 1: K forward and backward passes, one micro-batch each. Each micro-batch's
// mean loss is weighted by its tokens (backward runs from loss * weight) and the summed
// gradients are divided by the total weight: the mean over every token of the K micro-batches,
// as one batch of their rows gives. A non-finite micro-batch leaves non-finite gradients, which
// the step then skips or stops on, as for one batch.
std::optional<Trainer::Accumulated> Trainer::accumulate() {
  Accumulated a;
  double weight_sum = 0;
  try {
    for (int64_t i = 0; i < options_.grad_accum; ++i) {
      const Forward f = forward_();
      a.tokens += f.tokens;
      const double w = f.loss_tokens > 0 ? static_cast<double>(f.loss_tokens) : 1.0;
      weight_sum += w;
      if (!f.loss.defined()) continue;  // data-parallel: this shard of the micro-batch is empty
      a.loss += f.loss.item() * w;
      ag::mul(f.loss, w).backward();
    }
  } catch (const Error& e) {
    follow_loader();  // the micro-batches drawn so far were consumed
    if (!handle_error(e)) throw;
    return std::nullopt;
  }
  follow_loader();
  a.loss /= weight_sum;
  optim::scale_grads(params_, 1.0 / weight_sum);
  return a;
}

std::optional<StepStats> Trainer::step(bool* stop_out) {
  ++state_.step;
  dist_->begin_step(state_.step);
  for (Hook* h : hooks_) h->on_step_begin(*this);
  const bool single = options_.grad_accum == 1;
  Forward f;
  double loss = 0;
  int64_t tokens = 0;
  std::optional<PrecisionScope> precision(std::in_place, options_.precision);
  if (single) {
    try {
      f = forward_();
      follow_loader();
      if (f.loss.defined()) loss = f.loss.item();
    } catch (const Error& e) {
      follow_loader();  // the batch was drawn: a skipped step consumed it too
      if (!handle_error(e)) throw;
      return std::nullopt;
    }
    tokens = f.tokens;
  } else {
    const std::optional<Accumulated> a = accumulate();
    if (!a) return std::nullopt;
    loss = a->loss;
    tokens = a->tokens;
  }
  // The global loss and "someone wants to stop", so that every process takes the same branch.
  bool stop = poll_stop();
  dist_->agree(loss, stop);
  if (stop_out != nullptr) *stop_out = stop;
  if (!std::isfinite(loss)) {
    std::ostringstream what;
    what << "loss is " << loss;
    if (handle_nonfinite(what.str())) return std::nullopt;
  }
  try {
    if (single && f.loss.defined()) f.loss.backward();
  } catch (const Error& e) {
    if (!handle_error(e)) throw;
    return std::nullopt;
  }
  precision.reset();  // the update changes the weights: their bf16 copies end here
  const StepStats s = update(loss, tokens);
  for (Hook* h : hooks_) h->on_step_end(*this, s);
  return s;
}

bool Trainer::validation_step(int64_t step) const {
  return step == options_.total_steps ||
         (options_.eval_every > 0 && step % options_.eval_every == 0);
}

StopReason Trainer::fit() {
  requested_.reset();
  for (Hook* h : hooks_) h->on_train_begin(*this);
  // A run resumed at a validation step was already validated there.
  bool validated_last = state_.step > 0 && validation_step(state_.step);
  StopReason reason = StopReason::completed;
  while (state_.step < options_.total_steps) {
    validated_last = false;
    bool stop = false;
    if (!step(&stop)) continue;
    if (validation_step(state_.step)) {
      validated_last = true;
      for (Hook* h : hooks_) h->on_validate(*this);
      if (requested_) {
        reason = *requested_;
        break;
      }
    }
    if (options_.checkpoint_every > 0 && state_.step % options_.checkpoint_every == 0)
      for (Hook* h : hooks_) h->on_checkpoint(*this);
    if (dist_->decides_alone()) stop = poll_stop();  // one process: the latest news
    if (stop) {
      reason = StopReason::requested;
      break;
    }
  }
  if (reason == StopReason::completed && !validated_last)
    for (Hook* h : hooks_) h->on_validate(*this);
  for (Hook* h : hooks_) h->on_train_end(*this, reason);
  return reason;
}

}  // namespace qkv::train
