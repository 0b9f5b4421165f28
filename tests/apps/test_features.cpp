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
