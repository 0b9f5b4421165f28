// The run folder's Trainer hooks (run/train_hooks.hpp) driven in process, as cmd_train wires
// them: the metrics records, and a signal ending the run at a step boundary with a checkpoint.
// (The qkv binary's behaviour is covered end to end in tests/apps.)
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/run.hpp"
#include "run/train_hooks.hpp"
#include "run/train_run.hpp"
#include "support/common.hpp"
#include "train/seq2seq_step.hpp"
#include "train/trainer.hpp"

using namespace qkv;
using namespace qkv::config;
using namespace qkv::run;
using qkv::testing::TempDir;

namespace {

const char* kConfig = R"(seed = 3
threads = 1
[model]
d_model = 16
heads = 2
d_ff = 32
encoder_layers = 1
decoder_layers = 1
[data]
task = "copy"
max_len = 5
train_size = 64
valid_size = 8
test_size = 8
batch_size = 16
prefetch = 0
[train]
epochs = 0
max_steps = 6
log_every = 2
eval_every = 3
[optim]
name = "adam"
lr = 1e-3
)";

// A run in a temp folder with the hooks of cmd_train (without the progress bar).
struct HookedRun {
  TrainingRun r;
  train::SingleProcess dist;
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<train::Seq2SeqStep> fwd;
  std::unique_ptr<train::Trainer> trainer;
  std::vector<std::string> said;
  std::vector<double> losses;  // every step's, from the Trainer

  explicit HookedRun(const TempDir& dir) {
    std::ofstream(dir.file("tiny.toml")) << kConfig;
    open_training_run(r, {dir.file("tiny.toml"), dir.file("run"), "", {}}, 0, 1);
    prepare_run_folder(r, dist);
    metrics = std::make_unique<MetricsLog>(dir.file("run/metrics.jsonl"), true);
    fwd = std::make_unique<train::Seq2SeqStep>(*r.model, *r.loader);
    trainer = std::make_unique<train::Trainer>(r.model->parameters(), *r.opt, fwd->forward_fn(),
                                               r.options, &dist);
    trainer->set_loader(r.loader.get());
  }
  RunContext context() {
    return RunContext{r, *metrics, [this](const std::string& s) { said.push_back(s); }};
  }
};

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("run hooks: a metrics record every log_every steps with the interval's mean loss",
          "[run]") {
  TempDir dir("hooks_log");
  HookedRun h(dir);
  RunContext c = h.context();
  TrainLog log(c, [](int64_t, double, double, double) {});
  Checkpointer ckpt(c, -1);
  Validator validator(c, ckpt);
  train::Callbacks rec;
  rec.step_end = [&](train::Trainer&, const train::StepStats& s) { h.losses.push_back(s.loss); };
  for (train::Hook* hook : std::initializer_list<train::Hook*>{&rec, &log, &validator, &ckpt})
    h.trainer->add_hook(*hook);
  REQUIRE(h.trainer->fit() == train::StopReason::completed);
  REQUIRE(h.losses.size() == 6);
  std::vector<nlohmann::json> train_records, valid_records;
  for (const nlohmann::json& j : records(dir.file("run/metrics.jsonl")))
    (j.contains("split") ? valid_records : train_records).push_back(j);
  REQUIRE(train_records.size() == 3);  // steps 2, 4, 6
  for (size_t i = 0; i < 3; ++i) {
    CHECK(train_records[i]["step"] == 2 * (i + 1));
    CHECK(train_records[i]["loss"].get<double>() == (h.losses[2 * i] + h.losses[2 * i + 1]) / 2);
  }
  REQUIRE(valid_records.size() == 2);  // steps 3 and 6
  CHECK(valid_records[0]["step"] == 3);
  CHECK(valid_records[1]["step"] == 6);
  CHECK(find_checkpoint(h.r.dir).find("step-00000006") != std::string::npos);
  CHECK(h.said.size() == 2);  // one line per validation
}

TEST_CASE("run hooks: SIGTERM ends the run at the step boundary with a checkpoint, exit 143",
          "[run]") {
  TempDir dir("hooks_signal");
  HookedRun h(dir);
  RunContext c = h.context();
  Checkpointer ckpt(c, -1);
  StopOnSignal signals(c, ckpt);
  train::Callbacks kill;  // the signal arrives during step 2
  kill.step_end = [](train::Trainer& t, const train::StepStats&) {
    if (t.state().step == 2) std::raise(SIGTERM);
  };
  for (train::Hook* hook : std::initializer_list<train::Hook*>{&ckpt, &signals, &kill})
    h.trainer->add_hook(*hook);
  CHECK(h.trainer->fit() == train::StopReason::requested);
  CHECK(h.trainer->state().step == 2);
  CHECK(signals.exit_code() == 128 + SIGTERM);
  CHECK(ckpt.final_name() == "step-00000002");
  CHECK(find_checkpoint(h.r.dir).find("step-00000002") != std::string::npos);
  std::signal(SIGTERM, SIG_DFL);
}
