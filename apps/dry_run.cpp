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
#include "run/family.hpp"
#include "run/limits.hpp"
#include "run/train_run.hpp"

namespace qkv::app {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

ojson plan_json(const run::TrainingRun& r, const run::DataPlan& data) {
  const run::MemoryEstimate mem =
      run::estimate_model_memory(r.config, r.data.src_vocab.size(), r.data.tgt_vocab.size());
  const MemoryInfo avail = available_memory();
  const std::string toml = config::effective_toml(r.config);
  ojson j;
  j["config"] = ojson::parse(config::parse_config(toml, "config.toml").root.dump());
  j["config_toml"] = toml;
  j["run_dir"] = r.dir;
  j["run_dir_exists"] = fs::exists(r.dir);
  j["parameters"] = r.model->parameter_count();
  j["vocabulary"] = {{"source", r.data.src_vocab.size()}, {"target", r.data.tgt_vocab.size()}};
  j[data.size_key] = data.size;
  j["steps"] = r.options.total_steps;
  j["steps_per_epoch"] = r.per_epoch;
  j["epochs"] = static_cast<double>(r.options.total_steps) / static_cast<double>(r.per_epoch);
  j["validate_every"] = r.options.eval_every;
  j["tokens_per_step"] = {{"source", data.source_tokens}, {"target", data.target_tokens}};
  j["memory"] = {{"estimate_bytes", mem.bytes},
                 {"largest_term", mem.key},
                 {"available_bytes", avail.available},
                 {"available_from", avail.source}};
  j["threads"] = r.config.threads;
  return j;
}

void print_plan(const ojson& j, const run::TrainingRun& r, const run::DataPlan& data) {
  std::printf("%s", j["config_toml"].get<std::string>().c_str());
  std::printf("\n# plan (nothing was written)\n");
  std::printf(
      "# run folder       %s%s\n", r.dir.c_str(),
      j["run_dir_exists"].get<bool>() ? " (exists: train refuses it unless --overwrite)" : "");
  std::printf("# parameters       %lld\n", static_cast<long long>(j["parameters"].get<int64_t>()));
  std::printf("# vocabulary       %lld source, %lld target\n",
              static_cast<long long>(j["vocabulary"]["source"].get<int64_t>()),
              static_cast<long long>(j["vocabulary"]["target"].get<int64_t>()));
  std::printf("# %s\n", data.size_line.c_str());
  std::printf("# steps            %lld (%lld per epoch: %.2f epochs), validating every %lld\n",
              static_cast<long long>(r.options.total_steps), static_cast<long long>(r.per_epoch),
              j["epochs"].get<double>(), static_cast<long long>(r.options.eval_every));
  std::printf("# %s\n", data.tokens_line.c_str());
  std::printf("# memory           about %s (mostly %s) of %s available (%s)\n",
              human_bytes(j["memory"]["estimate_bytes"].get<double>()).c_str(),
              j["memory"]["largest_term"].get<std::string>().c_str(),
              human_bytes(j["memory"]["available_bytes"].get<double>()).c_str(),
              j["memory"]["available_from"].get<std::string>().c_str());
  std::printf("# threads          %lld\n", static_cast<long long>(r.config.threads));
}

}  // namespace

int cmd_config(const TrainArgs& a) {
  run::TrainingRun r;
  run::TrainRunArgs args{a.config, a.run_dir, a.resume, a.overrides, a.overwrite, true};
  run::open_training_run(r, args, 0, 1);
  const run::DataPlan data = r.family().data_plan(r);
  const ojson j = plan_json(r, data);
  if (a.json)
    std::printf("%s\n", j.dump().c_str());
  else
    print_plan(j, r, data);
  return 0;
}

}  // namespace qkv::app
