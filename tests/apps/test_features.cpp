// The training features of fairseq and nanoGPT recipes, through the real binary: short
// trainings that use each one, and the errors of bad values.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

std::string config(const std::string& name) {
  std::string s(1, '\'');
  s += source_dir();
  s += "/configs/";
  s += name;
  s += '\'';
  return s;
}

// A copy run of a few seconds.
const std::string kData =
    " --data.train_size 400 --data.valid_size 40 --data.test_size 40 --data.batch_size 16"
    " --model.d_model 32 --model.d_ff 64 --model.heads 2 --optim.warmup 5";
const std::string kTiny = " --threads 1 --quiet" + kData;

int64_t steps_per_epoch(const std::string& overrides) {
  const RunResult plan = run_qkv("config " + config("copy.toml") + kData + overrides + " --json");
  INFO(plan.output);
  REQUIRE(plan.status == 0);
  return nlohmann::json::parse(plan.output)["steps_per_epoch"].get<int64_t>();
}

std::vector<nlohmann::json> records(const fs::path& metrics) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("features: train.grad_accum trains, one metrics record per optimizer step", "[e2e]") {
  TempDir t("accum");
  // an epoch is still one pass: half the optimizer steps (rounded up) of 2 batches each
  const int64_t batches = steps_per_epoch("");
  CHECK(steps_per_epoch(" --train.grad_accum 2") == (batches + 1) / 2);
  const RunResult r = run_qkv(
      "train " + config("copy.toml") + " --run-dir " + t.file("run") + kTiny +
      " --train.grad_accum 2 --train.max_steps 12 --train.log_every 4 --train.eval_every 6");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::vector<int64_t> logged, validated;
  for (const auto& rec : records(t.path / "run" / "metrics.jsonl")) {
    if (!rec.contains("split")) logged.push_back(rec["step"].get<int64_t>());
    if (rec.value("split", "") == "valid") validated.push_back(rec["step"].get<int64_t>());
  }
  CHECK(logged == std::vector<int64_t>{4, 8, 12});
  CHECK(validated == std::vector<int64_t>{6, 12});
  const RunResult bad = run_qkv("train " + config("copy.toml") + " --run-dir " + t.file("bad") +
                                kTiny + " --train.grad_accum 0");
  CHECK(bad.status == 1);
  CHECK(bad.output.find("train.grad_accum: must be >= 1") != std::string::npos);
  CHECK_FALSE(fs::exists(t.path / "bad"));
}

TEST_CASE("features: checkpoint averaging, in training and by qkv average", "[e2e]") {
  TempDir t("average-e2e");
  const std::string run = t.file("run");
  const RunResult r = run_qkv("train " + config("copy.toml") + " --run-dir " + run + kTiny +
                              " --train.max_steps 15 --train.eval_every 5 --checkpoint.every 5"
                              " --checkpoint.keep 3 --checkpoint.average_last 3");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(fs::exists(t.path / "run" / "checkpoints" / "average" / "model.safetensors"));
  bool tested = false;
  for (const auto& rec : records(t.path / "run" / "metrics.jsonl"))
    if (rec.value("split", "") == "test") tested = rec.value("checkpoint", "") == "average";
  CHECK(tested);  // the final test evaluated the average
  const RunResult e = run_qkv("eval " + run + " --checkpoint average --split test --json");
  INFO(e.output);
  REQUIRE(e.status == 0);
  CHECK(nlohmann::json::parse(e.output)["examples"].get<int64_t>() == 40);
  // qkv average: any run, any folder; eval, translate load the folder by its path
  const std::string out = t.file("avg2");
  const RunResult a = run_qkv("average " + run + " --last 2 --out " + out);
  INFO(a.output);
  REQUIRE(a.status == 0);
  CHECK(a.output.find("averaged 2 checkpoints (step-00000010 .. step-00000015)") !=
        std::string::npos);
  CHECK(run_qkv("eval " + run + " --checkpoint " + out + " --json").status == 0);
  CHECK(run_qkv("translate " + run + " --checkpoint " + out + " '1 2 3'").status == 0);
  // bad values: one line, exit 1 (or 2 for command-line misuse)
  const RunResult many = run_qkv("average " + run + " --last 9");
  CHECK(many.status == 1);
  CHECK(many.output.find("keeps 3 checkpoints, fewer than the last 9 asked") != std::string::npos);
  const RunResult none = run_qkv("average " + t.file("nope") + " --last 2");
  CHECK(none.status == 1);
  CHECK(none.output.find("not a run folder") != std::string::npos);
  CHECK(run_qkv("average " + run).status == 2);  // --last is required
  const RunResult keep = run_qkv("train " + config("copy.toml") + " --run-dir " + t.file("k") +
                                 kTiny + " --checkpoint.average_last 5");
  CHECK(keep.status == 1);
  CHECK(keep.output.find("set checkpoint.keep >= 5") != std::string::npos);
}
