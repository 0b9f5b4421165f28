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

std::string config(const std::string& name) { return shipped_config(name); }

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

TEST_CASE("features: a decoder with every block option and wsd trains, eval gives ppl and bpc",
          "[e2e]") {
  TempDir t("options-lm");
  const std::string run = t.file("run");
  std::string cfg(1, '\'');
  cfg += source_dir();
  cfg += "/configs/shakespeare-char.toml'";
  const RunResult r = run_qkv(
      "train " + cfg + " --run-dir '" + run +
      "' --threads 1 --quiet --model.d_model 32 --model.d_ff 64 --model.decoder_layers 2"
      " --data.block_size 16 --model.max_len 16 --data.batch_size 32 --train.max_steps 60"
      " --train.log_every 10 --train.eval_every 30 --train.eval_iters 4 --optim.lr 1e-2"
      " --model.norm rmsnorm --model.qk_norm true --model.activation relu2"
      " --model.tie_output false --model.logit_softcap 15 --optim.schedule wsd --optim.warmup 10"
      " --optim.decay_frac 0.5");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::vector<double> losses, lrs;
  for (const auto& rec : records(t.path / "run" / "metrics.jsonl"))
    if (!rec.contains("split")) {
      losses.push_back(rec["loss"].get<double>());
      lrs.push_back(rec["lr"].get<double>());
    }
  REQUIRE(losses.size() == 6);
  CHECK(losses.back() < losses.front() - 0.3);  // it learns
  // wsd: warm, stable at the peak until step 30, then linear to the config's min_lr 1e-4 at 60
  CHECK(lrs[1] == Approx(1e-2));                         // step 20
  CHECK(lrs[3] == Approx(1e-4 + 9.9e-3 * 21.0 / 30.0));  // step 40: after 39 updates
  CHECK(lrs[5] == Approx(1e-4 + 9.9e-3 / 30.0));
  const RunResult e = run_qkv("eval '" + run + "' --threads 1 --json");
  INFO(e.output);
  REQUIRE(e.status == 0);
  const auto j = nlohmann::json::parse(e.output);
  const double loss = j["loss"].get<double>();
  CHECK(j["perplexity"].get<double>() == Approx(std::exp(loss)).epsilon(1e-12));
  CHECK(j["bits_per_char"].get<double>() == Approx(loss / std::log(2.0)).epsilon(1e-12));
  const RunResult text = run_qkv("eval '" + run + "' --threads 1");
  CHECK(text.output.find("bits per char") != std::string::npos);
  CHECK(text.output.find("perplexity") != std::string::npos);
  // the key/value cache decodes exactly as the full pass (qk_norm keys are cached normalised)
  const std::string gen = "generate '" + run + "' --tokens 40 --seed 2 --threads 1 --quiet";
  const RunResult cached = run_qkv(gen), uncached = run_qkv(gen + " --no-cache");
  REQUIRE(cached.status == 0);
  CHECK(cached.output == uncached.output);
}

TEST_CASE("features: an encoder-decoder with every block option learns to copy", "[e2e]") {
  TempDir t("options-s2s");
  const std::string run = t.file("run");
  const RunResult r = run_qkv("train " + config("copy.toml") + " --run-dir " + run + kTiny +
                              " --train.max_steps 150 --train.eval_every 150 --optim.warmup 20"
                              " --optim.lr 3e-3 --model.norm rmsnorm --model.qk_norm true"
                              " --model.activation swiglu --model.logit_softcap 20"
                              " --model.position rope --model.norm_first true");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const RunResult e = run_qkv("eval " + run + " --split test --json");
  INFO(e.output);
  REQUIRE(e.status == 0);
  const auto j = nlohmann::json::parse(e.output);
  CHECK(j["perplexity"].get<double>() == Approx(std::exp(j["loss"].get<double>())));
  CHECK(j["loss"].get<double>() < 2.0);  // uniform over the 14 tokens is 2.64
  CHECK(run_qkv("translate " + run + " --beam 3 '1 2 3'").status == 0);
  for (const auto& [flag, msg] : std::vector<std::pair<std::string, std::string>>{
           {"--model.norm batchnorm", "model.norm: must be layernorm or rmsnorm"},
           {"--model.activation swish", "model.activation: must be relu, gelu, relu2 or swiglu"},
           {"--model.logit_softcap -2", "model.logit_softcap: must be >= 0"},
           {"--optim.schedule wsd --optim.decay_frac 0", "optim.decay_frac: must be in (0, 1]"}}) {
    const RunResult bad = run_qkv("train " + config("copy.toml") + " --run-dir " + t.file("bad") +
                                  kTiny + " " + flag);
    INFO(flag << ": " << bad.output);
    CHECK(bad.status == 1);
    CHECK(bad.output.find(msg) != std::string::npos);
  }
}
