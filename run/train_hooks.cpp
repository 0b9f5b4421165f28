#include "run/train_hooks.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <filesystem>

#include "core/random.hpp"
#include "run/family.hpp"
#include "run/lm.hpp"
#include "run/run.hpp"
#include "runfolder/integrity.hpp"

namespace qkv::run {

namespace fs = std::filesystem;
using nlohmann::json;

MetricsLog::MetricsLog(const std::string& path, bool active, OnWrite on_write)
    : path_(path), active_(active), on_write_(std::move(on_write)) {
  if (!active_) return;
  out_.open(path, std::ios::app);
  QKV_CHECK(out_.good(), "train", "cannot write ", path);
}

void MetricsLog::write(const json& j) {
  if (!active_) return;
  out_ << j.dump() << '\n';
  out_.flush();
  if (on_write_) on_write_(j);
}

uint64_t MetricsLog::bytes() const {
  return active_ ? static_cast<uint64_t>(fs::file_size(path_)) : 0;
}

// --- TrainLog ---

TrainLog::TrainLog(RunContext& c, Show show, Extra extra)
    : c_(c), show_(std::move(show)), extra_(std::move(extra)) {}

void TrainLog::on_train_begin(train::Trainer&) { t0_ = std::chrono::steady_clock::now(); }

void TrainLog::on_step_end(train::Trainer& t, const train::StepStats& s) {
  train::TrainState& st = t.state();
  st.log_loss_sum += s.loss;
  st.log_norm_sum += s.grad_norm;
  ++st.log_count;
  tokens_ += s.tokens;  // the whole global batch's
  if (st.step % c_.run.config.train.log_every != 0 && st.step != t.options().total_steps) {
    show_(st.step, s.loss, s.lr, 0);
    return;
  }
  const double n = static_cast<double>(st.log_count);
  json j = {{"step", st.step},
            {"epoch", st.epoch},
            {"loss", st.log_loss_sum / n},
            {"lr", s.lr},
            {"grad_norm", st.log_norm_sum / n}};
  if (extra_) extra_(j);
  c_.metrics.write(j);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  show_(st.step, st.log_loss_sum / n, s.lr, secs > 0 ? static_cast<double>(tokens_) / secs : 0);
  st.log_loss_sum = st.log_norm_sum = 0;
  st.log_count = tokens_ = 0;
  t0_ = std::chrono::steady_clock::now();
}

// --- Checkpointer ---

namespace {
// Sum of every parameter value: equal on all ranks while the replicas agree (checked at
// each checkpoint).
double param_checksum(const std::vector<ag::Var>& params) {
  double s = 0;
  for (const ag::Var& p : params)
    for (float v : to_vector<float>(p.data())) s += v;
  return s;
}
}  // namespace

Checkpointer::Checkpointer(RunContext& c, int64_t saved_step) : c_(c), saved_step_(saved_step) {}

std::string Checkpointer::save(train::Trainer& t, bool is_best) {
  train::TrainState& st = t.state();
  saved_step_ = st.step;
  // st.loader and st.epoch: the Trainer keeps them current after every step (set_loader)
  st.dropout_seed = c_.run.model->dropout_generator().seed();
  st.dropout_position = c_.run.model->dropout_generator().position();
  st.ranks = t.dist().size();
  // data-parallel: a cheap guard that the replicas still agree (a no-op for one process)
  t.dist().check_same(param_checksum(t.params()), "the sum of the parameters");
  if (!t.dist().is_root()) return std::string();
  // A checkpoint is only ever written from finite weights, so "last good" stays true. (The
  // next step's loss is then non-finite too: it stops the run, or is skipped.)
  if (const std::string bad = first_nonfinite(c_.run.model->checkpoint_state()); !bad.empty()) {
    spdlog::warn("step {}: the parameters are no longer finite ({}); no checkpoint written",
                 st.step, bad);
    return std::string();
  }
  st.metrics_bytes = c_.metrics.bytes();
  const std::string name = save_checkpoint(c_.run.dir, *c_.run.model, *c_.run.opt, st,
                                           c_.run.config.checkpoint.keep, is_best);
  if (is_best) st.best = name;
  return name;
}

// (not twice: validation may just have written this step's checkpoint as the best)
void Checkpointer::on_checkpoint(train::Trainer& t) {
  if (saved_step_ != t.state().step) save(t, false);
}

std::string Checkpointer::on_nonfinite(train::Trainer& t, const std::string& what, bool skipping) {
  if (skipping) {
    c_.say(fmt::format("step {}: {}; skipping this step", t.state().step, what));
    c_.metrics.write({{"step", t.state().step}, {"skipped", true}});
    return std::string();
  }
  const std::string last = last_good_checkpoint(c_.run.dir);
  return fmt::format("last good checkpoint: {}; set train.skip_nonfinite = true to skip such steps",
                     last.empty() ? "none" : last);
}

void Checkpointer::on_train_end(train::Trainer& t, train::StopReason r) {
  if (r != train::StopReason::requested) {
    if (saved_step_ != t.state().step) save(t, false);
    return;
  }
  final_name_ = saved_step_ == t.state().step
                    ? fs::path(find_checkpoint(c_.run.dir)).filename().string()
                    : save(t, false);
}

// --- Validator ---

Validator::Validator(RunContext& c, Checkpointer& ckpt, std::function<void()> after)
    : c_(c), ckpt_(ckpt), after_(std::move(after)) {}

void Validator::on_validate(train::Trainer& t) {
  train::Distributed& dist = t.dist();
  bool better = false;
  // data-parallel: rank 0 validates alone (the numbers of one process)
  if (dist.is_root()) better = family_for(c_.run.config.data.task).validate(c_, t.state());
  // data-parallel: rank 0's decisions are everyone's (the others wait here meanwhile)
  train::TrainState& st = t.state();
  better = dist.from_root(better ? 1 : 0) != 0;
  st.evals_since_best =
      static_cast<int64_t>(dist.from_root(static_cast<double>(st.evals_since_best)));
  if (c_.run.config.checkpoint.every == 0)
    ckpt_.save(t, better);
  else if (better)
    ckpt_.save(t, true);
  if (dist.is_root() && after_) after_();
}

void Validator::on_train_end(train::Trainer&, train::StopReason r) {
  if (r == train::StopReason::early_stopping)
    c_.say(fmt::format("early stopping: no improvement in {} validations",
                       c_.run.config.train.early_stopping));
}

// --- StopOnSignal ---

namespace {
// SIGINT (Ctrl-C), SIGTERM (docker stop, systemd, job schedulers) and SIGHUP (a closed
// terminal) all end the run at the next step boundary with a checkpoint; the exit code is
// 128 + the signal, as a shell reports a process killed by it.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};
// A second signal ends the process at once (the first may be waiting on a stuck step).
void on_stop_signal(int sig) {
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_interrupted = true;
}
int stop_signal() { return g_signal.load() != 0 ? g_signal.load() : SIGINT; }
}  // namespace

void StopOnSignal::on_train_begin(train::Trainer&) {
  if (!sources_.signals) return;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_signal);
}

bool StopOnSignal::signalled() const { return sources_.signals && g_interrupted; }

bool StopOnSignal::should_stop(train::Trainer&) {
  if (signalled()) return true;
  // (asked every step until it says yes: a request is not taken back)
  if (!by_request_ && sources_.requested && sources_.requested()) by_request_ = true;
  return by_request_;
}

int StopOnSignal::exit_code() const { return 128 + (signalled() ? stop_signal() : SIGINT); }

void StopOnSignal::on_train_end(train::Trainer& t, train::StopReason r) {
  if (r != train::StopReason::requested) return;
  // data-parallel: mpirun ends the job at the first non-zero exit; rank 0 must be done.
  t.dist().barrier();
  const int sig = stop_signal();
  const std::string& name = ckpt_.final_name();
  // data-parallel: another rank's stop may have ended this one (neither signal nor request)
  const bool requested = !signalled() && by_request_;
  if (t.dist().is_root())
    spdlog::warn("interrupted ({}) at step {}: {}; continue with qkv train --resume {}",
                 requested        ? "stop requested"
                 : sig == SIGTERM ? "SIGTERM"
                 : sig == SIGHUP  ? "SIGHUP"
                                  : "SIGINT",
                 t.state().step,
                 name.empty() ? "no checkpoint written (see above)" : "wrote checkpoint " + name,
                 c_.run.dir);
}

// --- DropoutPerRank ---

// Rank r draws its dropout masks of step `step` from its own stream, a pure function of
// (seed, rank, step): independent across ranks and resumable without saving every rank's
// generator. (One process keeps the model's single running stream, as before.)
void DropoutPerRank::on_step_begin(train::Trainer& t) {
  if (t.dist().decides_alone()) return;
  const uint64_t stream =
      random_bits(c_.run.config.seed ^ 0x64726f706f7574ULL, static_cast<uint64_t>(t.dist().rank()));
  c_.run.model->dropout_generator().set_state(stream, static_cast<uint64_t>(t.state().step) << 32);
}

}  // namespace qkv::run
