// qkv config CONFIG [--section.key VALUE ...] [--json]   |   qkv train CONFIG --dry-run [--json]
//
// Everything `qkv train` would do before its first step (read the config and the data, build
// the vocabularies, the model and the batch plan) and nothing after: no run folder, no lock,
// no file. What it prints is what the run would be: the effective config with every default
// (config.toml as it would be saved), the parameter count, the steps and epochs, the tokens of
// a step and the memory estimate that the run is checked against.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "config/document.hpp"
#include "data/task_kind.hpp"
#include "run/limits.hpp"
#include "run/train_run.hpp"

namespace qkv::app {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

bool lm(const run::TrainingRun& r) { return data::is_language_model(r.cfg.data.task); }

// The mean tokens of a training step: source and target (with <bos>/<eos>) over an epoch.
std::pair<double, double> tokens_per_step(const run::TrainingRun& r) {
  if (lm(r))
    return {0.0, static_cast<double>(r.cfg.data.batch_size * r.cfg.data.block_size *
                                     r.cfg.train.grad_accum)};
  double src = 0, tgt = 0;
  for (const data::Example& e : r.data.train.examples) {
    src += static_cast<double>(e.src.size());
    tgt += static_cast<double>(r.data.framing.target_len(static_cast<int64_t>(e.tgt.size())));
  }
  const double steps = static_cast<double>(std::max<int64_t>(1, r.per_epoch));
  return {src / steps, tgt / steps};
}

ojson plan_json(const run::TrainingRun& r) {
  const auto [src, tgt] = tokens_per_step(r);
  const run::MemoryEstimate mem =
      run::estimate_model_memory(r.cfg, r.data.src_vocab.size(), r.data.tgt_vocab.size());
  const MemoryInfo avail = available_memory();
  const std::string toml = config::effective_toml(r.cfg);
  ojson j;
  j["config"] = ojson::parse(config::parse_config(toml, "config.toml").root.dump());
  j["config_toml"] = toml;
  j["run_dir"] = r.dir;
  j["run_dir_exists"] = fs::exists(r.dir);
  j["parameters"] = r.model->parameter_count();
  j["vocabulary"] = {{"source", r.data.src_vocab.size()}, {"target", r.data.tgt_vocab.size()}};
  if (lm(r))
    j["train_tokens"] = r.data.lm_train.size();
  else
    j["train_examples"] = r.data.train.size();
  j["steps"] = r.options.total_steps;
  j["steps_per_epoch"] = r.per_epoch;
  j["epochs"] = static_cast<double>(r.options.total_steps) / static_cast<double>(r.per_epoch);
  j["validate_every"] = r.options.eval_every;
  j["tokens_per_step"] = {{"source", src}, {"target", tgt}};
  j["memory"] = {{"estimate_bytes", mem.bytes},
                 {"largest_term", mem.key},
                 {"available_bytes", avail.available},
                 {"available_from", avail.source}};
  j["threads"] = r.cfg.threads;
  return j;
}

void print_plan(const ojson& j, const run::TrainingRun& r) {
  std::printf("%s", j["config_toml"].get<std::string>().c_str());
  std::printf("\n# plan (nothing was written)\n");
  std::printf(
      "# run folder       %s%s\n", r.dir.c_str(),
      j["run_dir_exists"].get<bool>() ? " (exists: train refuses it unless --overwrite)" : "");
  std::printf("# parameters       %lld\n", static_cast<long long>(j["parameters"].get<int64_t>()));
  std::printf("# vocabulary       %lld source, %lld target\n",
              static_cast<long long>(j["vocabulary"]["source"].get<int64_t>()),
              static_cast<long long>(j["vocabulary"]["target"].get<int64_t>()));
  if (lm(r))
    std::printf("# training text    %lld tokens\n",
                static_cast<long long>(j["train_tokens"].get<int64_t>()));
  else
    std::printf("# training split   %lld examples\n",
                static_cast<long long>(j["train_examples"].get<int64_t>()));
  std::printf("# steps            %lld (%lld per epoch: %.2f epochs), validating every %lld\n",
              static_cast<long long>(r.options.total_steps), static_cast<long long>(r.per_epoch),
              j["epochs"].get<double>(), static_cast<long long>(r.options.eval_every));
  if (lm(r))
    std::printf("# tokens per step  %.0f (batch_size x block_size)\n",
                j["tokens_per_step"]["target"].get<double>());
  else
    std::printf("# tokens per step  %.0f source + %.0f target (mean over an epoch)\n",
                j["tokens_per_step"]["source"].get<double>(),
                j["tokens_per_step"]["target"].get<double>());
  std::printf("# memory           about %s (mostly %s) of %s available (%s)\n",
              human_bytes(j["memory"]["estimate_bytes"].get<double>()).c_str(),
              j["memory"]["largest_term"].get<std::string>().c_str(),
              human_bytes(j["memory"]["available_bytes"].get<double>()).c_str(),
              j["memory"]["available_from"].get<std::string>().c_str());
  std::printf("# threads          %lld\n", static_cast<long long>(r.cfg.threads));
}

}  // namespace

int cmd_config(const TrainArgs& a) {
  run::TrainingRun r;
  run::TrainRunArgs args{a.config, a.run_dir, a.resume, a.overrides, a.overwrite, true};
  run::open_training_run(r, args, 0, 1);
  const ojson j = plan_json(r);
  if (a.json)
    std::printf("%s\n", j.dump().c_str());
  else
    print_plan(j, r);
  return 0;
}

}  // namespace qkv::app
