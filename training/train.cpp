#include "training/train.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <initializer_list>
#include <optional>

#include "core/precision.hpp"
#include "figures/progress.hpp"
#include "inspect/probe_hook.hpp"
#include "run/distributed.hpp"
#include "run/family.hpp"
#include "run/train_hooks.hpp"
#include "run/train_run.hpp"
#include "train/seq2seq_step.hpp"
#include "training/records.hpp"

namespace qkv::training {

namespace fs = std::filesystem;
using figures::Progress;
using nlohmann::json;

namespace {

// The progress bar: cleared at the end and before an error.
class ProgressHook : public train::Hook {
 public:
  explicit ProgressHook(Progress& p) : p_(p) {}
  std::string on_nonfinite(train::Trainer&, const std::string&, bool skipping) override {
    if (!skipping) p_.finish();
    return {};
  }
  void on_train_end(train::Trainer&, train::StopReason) override { p_.finish(); }

 private:
  Progress& p_;
};

// What stops the run besides its end: the process's signals (when asked) and the caller's.
run::StopSources stop_sources(const TrainRequest& req, const TrainCallbacks& cb) {
  run::StopSources s;
  s.signals = req.handle_signals;
  if (cb.stop != nullptr || cb.should_stop)
    s.requested = [&cb] {
      return (cb.stop != nullptr && cb.stop->requested()) || (cb.should_stop && cb.should_stop());
    };
  return s;
}

// The run folder's hooks, the probe and the progress bar around one Trainer, declared in the
// order they refer to each other and added in the order run/train_hooks.hpp asks for.
struct RunHooks {
  RunHooks(run::RunContext& c, Progress& progress, const train::Seq2SeqStep& fwd,
           run::dist::Context& ctx, run::StopSources stop)
      : bar(progress),
        log(
            c,
            [&progress](int64_t s, double loss, double lr, double tps) {
              progress.update(s, loss, lr, tps);
            },
            [&c, &fwd, &ctx](json& j) {
              if (c.run.config.train.log_attention_entropy) add_entropy(j, fwd, ctx);
            }),
        // A resumed run's checkpoint is of its current step.
        ckpt(c, c.run.resume_from.empty() ? -1 : c.run.state.step),
        validator(c, ckpt, [&c] { plot_losses(c.run.dir); }),
        early(c.run.config.train.early_stopping),
        signals(c, ckpt, std::move(stop)),
        dropout(c) {}

  void add_to(train::Trainer& trainer) {
    std::vector<train::Hook*> hooks{&bar, &log};
    if (probe) hooks.push_back(&*probe);  // before validation: its record precedes the checkpoint
    for (train::Hook* h :
         std::initializer_list<train::Hook*>{&validator, &early, &ckpt, &signals, &dropout})
      hooks.push_back(h);
    for (train::Hook* h : hooks) trainer.add_hook(*h);
  }

  ProgressHook bar;
  run::TrainLog log;
  // [probe]: the heads' scores while it trains (rank 0 alone: its record, its model's bits)
  std::optional<inspect::ProbeHook> probe;
  run::Checkpointer ckpt;
  run::Validator validator;
  train::EarlyStopping early;
  run::StopOnSignal signals;
  run::DropoutPerRank dropout;
};

// After fit(): what ended it, and (completed or stopped early) the held-out result, the test
// split with the best checkpoint (a language model: its best estimate), rank 0's.
TrainResult finish(run::TrainingRun& r, train::Trainer& trainer, train::StopReason reason,
                   RunHooks& hooks, run::MetricsLog& metrics, run::dist::Context& ctx, bool quiet) {
  TrainResult out;
  out.reason = reason;
  out.step = trainer.state().step;
  out.run_dir = r.dir;
  if (reason == train::StopReason::requested) {
    out.exit_code = hooks.signals.exit_code();
    out.checkpoint = hooks.ckpt.final_name();
    return out;
  }
  const bool root = ctx.is_root();
  if (ctx.size() > 1 && !quiet && root)
    spdlog::info(
        "data-parallel: {} processes; summing gradients ({} buckets) took {:.2f} s on rank 0",
        ctx.size(), ctx.reducer().buckets(), ctx.reducer().seconds());
  if (!root) return out;
  out.final_line = r.family().final_result(r, trainer.state(), metrics);
  plot_losses(r.dir);
  if (!quiet) spdlog::info("{}", out.final_line);
  return out;
}

// The hooks around the Trainer, then fit() (fitting: set as it starts) and the final test.
TrainResult train_in_folder(run::TrainingRun& r, std::optional<inspect::ProbeInputs> probe_in,
                            run::dist::Context& ctx, const TrainRequest& req,
                            const TrainCallbacks& cb, bool& fitting) {
  run::testing::after_folder();
  const bool root = ctx.is_root();
  run::MetricsLog metrics((fs::path(r.dir) / "metrics.jsonl").string(), root, cb.on_record);
  Progress progress(r.options.total_steps, r.state.step, r.config.train.log_every,
                    req.quiet || !root, req.verbose && root);
  progress.message(run::run_summary(r, ctx.size()));

  // Label 0 is <pad> (ignored), except in a language model's vocabulary (no specials).
  train::Seq2SeqStep fwd(*r.model, *r.loader,
                         {r.family().ignore_label(), r.config.train.label_smoothing,
                          r.config.train.log_attention_entropy});
  train::Trainer trainer(r.model->parameters(), *r.opt, fwd.forward_fn(), r.options, &ctx);
  trainer.set_loader(r.loader.get());
  trainer.state() = r.state;
  run::RunContext c{r, metrics, [&](const std::string& s) { progress.message(s); }};
  RunHooks hooks(c, progress, fwd, ctx, stop_sources(req, cb));
  if (probe_in) hooks.probe.emplace(c, r.options.precision, std::move(*probe_in));
  hooks.add_to(trainer);

  r.model->train();
  fitting = true;
  const train::StopReason reason = trainer.fit();
  return finish(r, trainer, reason, hooks, metrics, ctx, req.quiet);
}

}  // namespace

TrainResult train(const TrainRequest& req, const TrainCallbacks& cb) {
  run::TrainingRun r;
  run::TrainRunArgs args;
  args.config = req.config, args.config_text = req.config_text;
  args.run_dir = req.run_dir, args.resume = req.resume;
  args.overrides = req.overrides, args.overwrite = req.overwrite;
  run::open_training_run(r, args, run::dist::rank(), run::dist::size());
  // Validation and the final test decode in the run's precision too; each training step opens
  // its own scope inside this one (train/trainer.hpp).
  const PrecisionScope precision(r.options.precision);
  run::dist::Context ctx(r.model->parameters());  // one process: rank 0 of 1, no MPI
  // [probe]: its inputs drawn (and refused) before there is a folder to leave behind
  std::optional<inspect::ProbeInputs> probe_in;
  if (r.config.probe.every > 0 && ctx.is_root())
    probe_in = inspect::probe_inputs(r.config, r.data, *r.model);
  run::prepare_run_folder(r, ctx);
  bool fitting = false;
  try {
    return train_in_folder(r, std::move(probe_in), ctx, req, cb, fitting);
  } catch (const Error&) {
    // Failed before its first step: a new run's folder goes (the same call runs again). An
    // allocation failure anywhere is the caller's to clean up (run::discard_unfinished_run).
    if (!fitting) run::discard_unfinished_run();
    throw;
  }
}

}  // namespace qkv::training
