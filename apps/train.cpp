// qkv train CONFIG [--run-dir DIR] [--section.key VALUE ...]   |   qkv train --resume DIR
//
// The run folder and its hooks (run/train_run.hpp, run/train_hooks.hpp) around the Trainer
// (train/trainer.hpp); this file adds what the command line shows: the progress bar, loss.svg
// and the final test.
//
// Under `mpirun -np N` this trains data-parallel (docs/distributed.md): every rank holds the
// same model, takes its shard of the same global batch and sums gradients with the others
// (dist::Context); rank 0 alone writes the run folder, validates and prints.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "apps/commands.hpp"
#include "figures/attention_stats.hpp"
#include "figures/plot.hpp"
#include "figures/progress.hpp"
#include "figures/report.hpp"
#include "inspect/probe_hook.hpp"
#include "run/distributed.hpp"
#include "run/run.hpp"
#include "run/train_hooks.hpp"
#include "run/train_run.hpp"
#include "train/seq2seq_step.hpp"
#include "train/trainer.hpp"

namespace qkv::app {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace figures;

namespace {

// loss.svg from metrics.jsonl (read as qkv report reads it): the training loss and the
// validation loss against steps.
void plot_losses(const fs::path& run_dir) {
  report::RunData run;
  report::read_metrics((run_dir / "metrics.jsonl").string(), run);
  Series train{"train loss", {}, {}, ""}, valid{"valid loss", {}, {}, ""};
  for (const config::ojson& j : run.records) {
    if (!j.contains("loss") || !j["loss"].is_number()) continue;  // e.g. a skipped step
    Series* s = !j.contains("split") ? &train : j["split"] == "valid" ? &valid : nullptr;
    if (s == nullptr) continue;
    s->x.push_back(j["step"].get<double>());
    s->y.push_back(j["loss"].get<double>());
  }
  LineChart c{"Loss", "step", "cross-entropy (nats / token)", false, false, {train, valid}};
  write_svg((run_dir / "loss.svg").string(), c);
}

// Each layer's attention entropy over the global batch, approximated as the mean of the
// ranks' values weighted by their rows (a rank with an empty shard has no maps).
std::vector<double> global_entropy(const std::vector<ag::Var>& maps, size_t layers, int64_t rows,
                                   int64_t global_rows, train::Distributed& dist) {
  std::vector<double> e(layers, 0.0);
  if (!maps.empty()) {
    const std::vector<double> mine = attention_entropy(maps);
    for (size_t i = 0; i < layers && i < mine.size(); ++i)
      e[i] = mine[i] * static_cast<double>(rows) / static_cast<double>(global_rows);
  }
  dist.allreduce_sum(e.data(), static_cast<int64_t>(e.size()));
  return e;
}

// train.log_attention_entropy: the mean attention entropy of each layer in a metrics record,
// one key per attention site (nn::AttentionSite::metric_key: encoder_self, decoder_self,
// decoder_cross).
void add_entropy(json& j, const train::Seq2SeqStep& fwd, train::Distributed& dist) {
  json e = json::object();
  for (const train::SitePatterns& s : fwd.attention_patterns()) {
    if (dist.size() == 1) {
      e[s.site.metric_key()] = attention_entropy(s.layers);
      continue;
    }
    // data-parallel: combined over the ranks
    const data::Batch& b = fwd.batch();
    e[s.site.metric_key()] =
        global_entropy(s.layers, static_cast<size_t>(s.site.layers), b.size(), b.global_size, dist);
  }
  j["attention_entropy"] = std::move(e);
}

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

// The held-out result: the test split with the best checkpoint (an LM: its best estimate).
void final_report(run::TrainingRun& r, const train::TrainState& st, run::MetricsLog& metrics,
                  bool quiet) {
  const std::string line = r.family().final_result(r, st, metrics);
  plot_losses(r.dir);
  if (!quiet) spdlog::info("{}", line);
}

// The run folder's hooks around the Trainer, then fit() (fitting: set as it starts) and the
// final test.
int train_in_folder(run::TrainingRun& r, std::optional<inspect::ProbeInputs> probe_in,
                    run::dist::Context& ctx, const TrainArgs& a, bool& fitting) {
  run::testing::after_folder();
  const bool root = ctx.is_root();
  run::MetricsLog metrics((fs::path(r.dir) / "metrics.jsonl").string(), root);
  Progress progress(r.options.total_steps, r.state.step, r.config.train.log_every, a.quiet || !root,
                    a.verbose && root);
  progress.message(run::run_summary(r, ctx.size()));

  // Label 0 is <pad> (ignored), except in a language model's vocabulary (no specials).
  train::Seq2SeqStep fwd(*r.model, *r.loader,
                         {r.family().ignore_label(), r.config.train.label_smoothing,
                          r.config.train.log_attention_entropy});
  train::Trainer trainer(r.model->parameters(), *r.opt, fwd.forward_fn(), r.options, &ctx);
  trainer.set_loader(r.loader.get());
  trainer.state() = r.state;
  run::RunContext c{r, metrics, [&](const std::string& s) { progress.message(s); }};
  ProgressHook bar(progress);
  run::TrainLog log(
      c, [&](int64_t s, double loss, double lr, double tps) { progress.update(s, loss, lr, tps); },
      [&](json& j) {
        if (r.config.train.log_attention_entropy) add_entropy(j, fwd, ctx);
      });
  // A resumed run's checkpoint is of its current step.
  run::Checkpointer ckpt(c, r.resume_from.empty() ? -1 : r.state.step);
  run::Validator validator(c, ckpt, [&] { plot_losses(r.dir); });
  train::EarlyStopping early(r.config.train.early_stopping);
  run::StopOnSignal signals(c, ckpt);
  run::DropoutPerRank dropout(c);
  // [probe]: the heads' scores while it trains (rank 0 alone: its record, its model's bits)
  std::optional<inspect::ProbeHook> probe;
  if (probe_in) probe.emplace(c, r.options.precision, std::move(*probe_in));
  std::vector<train::Hook*> hooks{&bar, &log};
  if (probe) hooks.push_back(&*probe);  // before validation: its record precedes the checkpoint
  for (train::Hook* h :
       std::initializer_list<train::Hook*>{&validator, &early, &ckpt, &signals, &dropout})
    hooks.push_back(h);
  for (train::Hook* h : hooks) trainer.add_hook(*h);

  r.model->train();
  fitting = true;
  if (trainer.fit() == train::StopReason::requested) return signals.exit_code();
  if (ctx.size() > 1 && !a.quiet && root)
    spdlog::info(
        "data-parallel: {} processes; summing gradients ({} buckets) took {:.2f} s on rank 0",
        ctx.size(), ctx.reducer().buckets(), ctx.reducer().seconds());
  if (root) final_report(r, trainer.state(), metrics, a.quiet);  // the test split: rank 0's
  return 0;
}

}  // namespace

int cmd_train(const TrainArgs& a) {
  run::TrainingRun r;
  run::open_training_run(r, {a.config, a.run_dir, a.resume, a.overrides, a.overwrite, false},
                         run::dist::rank(), run::dist::size());
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
    return train_in_folder(r, std::move(probe_in), ctx, a, fitting);
  } catch (const Error&) {
    // Failed before its first step: a new run's folder goes (the same command runs again).
    // An allocation failure anywhere is apps/main.cpp's to clean up.
    if (!fitting) run::discard_unfinished_run();
    throw;
  }
}

}  // namespace qkv::app
