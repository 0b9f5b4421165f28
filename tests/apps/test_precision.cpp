// precision = "bf16" through the real binary: deterministic training, a bf16 checkpoint read in
// fp32 and back, and bf16 refused (one line, naming the missing feature) where oneDNN cannot
// run it, which ONEDNN_MAX_CPU_ISA=AVX2 simulates on any CPU.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/precision.hpp"
#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

const std::string kShort =
    " --train.max_steps 20 --optim.warmup 5 --data.train_size 400 --data.valid_size 50"
    " --data.test_size 50 --quiet";

std::string copy_config() { return source_dir() + "/configs/copy.toml"; }

// qkv with ONEDNN_MAX_CPU_ISA=AVX2: oneDNN reads it at its first use and stays below bf16.
RunResult run_capped(const std::string& args) {
  return run_qkv("ONEDNN_MAX_CPU_ISA=AVX2 '" + qkv_binary() + "' " + args, "/usr/bin/env");
}

}  // namespace

TEST_CASE(
    "precision bf16: two runs of one config, seed and threads give the same metrics and "
    "checkpoint bytes, the checkpoint evaluates in fp32 too") {
  if (const std::string why = qkv::bf16_unsupported_reason(); !why.empty())
    QKV_SKIP("bf16 cannot run here: " + why);
  TempDir dir("precision");
  const std::string a = (dir.path / "a").string(), b = (dir.path / "b").string();
  for (const std::string& run : {a, b}) {
    const RunResult r = run_qkv("train " + copy_config() + " --run-dir " + run +
                                " --precision bf16 --threads 2" + kShort);
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  CHECK(read_file(a + "/metrics.jsonl") == read_file(b + "/metrics.jsonl"));
  const std::string config = read_file(a + "/config.toml");
  CHECK(config.find("precision = \"bf16\"") != std::string::npos);
  CHECK(config.find("threads = 2") != std::string::npos);
  // The weights and the optimizer's state, byte for byte (the last checkpoint: step 20).
  for (const char* file : {"model.safetensors", "optim.safetensors"}) {
    const std::string last = std::string("/checkpoints/step-00000020/") + file;
    const std::string bytes = read_file(a + last);
    INFO(last);
    REQUIRE(!bytes.empty());
    const bool same = bytes == read_file(b + last);  // (not the bytes themselves on failure)
    CHECK(same);
  }
  // The weights are float32 whatever the products ran in: the run evaluates in both.
  const RunResult f = run_qkv("eval " + a + " --json --precision fp32");
  const RunResult h = run_qkv("eval " + a + " --json");
  INFO(f.output << h.output);
  REQUIRE(f.status == 0);
  REQUIRE(h.status == 0);
  const auto loss = [](const std::string& out) {
    return nlohmann::json::parse(out.substr(out.find('{')))["loss"].get<double>();
  };
  CHECK(std::abs(loss(f.output) - loss(h.output)) < 0.02 * loss(f.output));
  // And training resumes from it in fp32 (a checkpoint does not record the precision).
  const RunResult t = run_qkv("translate " + a + " --precision fp32 '1 2 3'");
  INFO(t.output);
  CHECK(t.status == 0);
}

TEST_CASE("precision bf16 where oneDNN is capped below avx512_core_bf16: one error, no work") {
  TempDir dir("precision_capped");
  const std::string run = (dir.path / "r").string();
  const RunResult r =
      run_capped("train " + copy_config() + " --run-dir " + run + " --precision bf16" + kShort);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("bf16 cannot run here") != std::string::npos);
  CHECK(r.output.find("ONEDNN_MAX_CPU_ISA") != std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  CHECK(!fs::exists(run));
  // auto falls back to fp32 and says so; bench refuses bf16 before timing anything
  const RunResult a =
      run_capped("train " + copy_config() + " --run-dir " + run + " --precision auto" + kShort);
  INFO(a.output);
  CHECK(a.status == 0);
  CHECK(a.output.find("precision = auto: fp32") != std::string::npos);
  // ... and the run folder records what ran and why (provenance.json)
  const auto prov = nlohmann::json::parse(read_file(run + "/provenance.json"))["precision"];
  CHECK(prov["asked"] == "auto");
  CHECK(prov["ran"] == "fp32");
  CHECK(prov["why"].get<std::string>().find("ONEDNN_MAX_CPU_ISA") != std::string::npos);
  const RunResult bench = run_capped("bench --model tiny --precision bf16 --min-seconds 0");
  INFO(bench.output);
  CHECK(bench.status == 1);
  CHECK(bench.output.find("bf16 cannot run here") != std::string::npos);
}

TEST_CASE("precision: an unknown value is one error naming the accepted ones") {
  const RunResult r = run_qkv("train " + copy_config() + " --precision fp16" + kShort);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("must be fp32, bf16 or auto, got 'fp16'") != std::string::npos);
}

TEST_CASE("precision bf16 with an unknown QKV_ATTENTION_BACKEND: one error before any work") {
  SKIP_WITHOUT_BF16();
  TempDir dir("precision_backend");
  const std::string run = (dir.path / "r").string();
  const RunResult r =
      run_qkv("QKV_ATTENTION_BACKEND=onedn '" + qkv_binary() + "' train " + copy_config() +
                  " --run-dir " + run + " --precision bf16" + kShort,
              "/usr/bin/env");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("QKV_ATTENTION_BACKEND: must be auto, tiles or onednn, got 'onedn'") !=
        std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  CHECK(!fs::exists(run));
}
