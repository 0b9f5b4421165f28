// Attention-only models (model.attn_only) on the repeat task, through the binary: the shipped
// induction configs train (shortened), the run folder reloads the model without an FFN, the
// attributions of an attention-only model sum to the logit with no MLP terms, and qkv generate,
// lens and heads read its single-character symbols. An attention-only encoder-decoder trains too.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "inspect/attribution.hpp"
#include "inspect/lens.hpp"
#include "nn/hooks.hpp"
#include "run/inference.hpp"
#include "support/process.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

// qkv train on a shipped config into run_dir, on one thread, with overrides.
RunResult train_run(const std::string& config, const std::string& run_dir,
                    const std::string& more) {
  return run_qkv("train " + shipped_config(config) + " --run-dir '" + run_dir +
                 "' --threads 1 --quiet " + more);
}

// 60 steps of the shipped 2-layer config, smaller, trained once for every case.
const TempDir& runs() {
  static TempDir dir("induction");
  static const bool trained = [] {
    const RunResult r = train_run("induction-2l.toml", dir.file("2l"),
                                  "--train.max_steps 60 --train.eval_every 60 --train.eval_iters 2"
                                  " --data.train_size 200 --data.valid_size 10 --model.d_model 32");
    INFO(r.output);
    REQUIRE(r.status == 0);
    return true;
  }();
  (void)trained;
  return dir;
}

}  // namespace

TEST_CASE("induction: the run folder keeps attn_only and reloads a model without an FFN") {
  const std::string run = runs().file("2l");
  const std::string config = read_file(run + "/config.toml");
  CHECK(config.find("attn_only = true") != std::string::npos);
  CHECK(config.find("task = \"repeat\"") != std::string::npos);
  const auto inf =
      run::open_inference(run, {.precision = Precision::fp32, .threads = 1, .op = "test"});
  for (const auto& [name, p] : inf->model().named_parameters()) {
    INFO(name);
    CHECK(name.find("ffn") == std::string::npos);
  }
  for (const std::string& n : nn::hook_points(inf->model())) {
    INFO(n);
    CHECK(n.find("mlp") == std::string::npos);
  }
  // metrics: a training loss per log line and a validation at step 60
  const std::string metrics = read_file(run + "/metrics.jsonl");
  CHECK(metrics.find("\"split\":\"valid\"") != std::string::npos);
}

TEST_CASE("induction: attributions of an attention-only model sum to the logit, no MLP terms") {
  const auto inf = run::open_inference(runs().file("2l"),
                                       {.precision = Precision::fp32, .threads = 1, .op = "test"});
  const data::Ids input = inf->encode("abcdeabcd", "test");
  for (const int64_t target : {int64_t{4}, int64_t{17}}) {
    const inspect::Attribution a = inspect::direct_logit_attribution(*inf, input, target);
    double total = 0;
    int heads = 0;
    for (const auto& p : a.parts) {
      INFO(p.name);
      CHECK(p.name.rfind("mlp", 0) == std::string::npos);
      total += p.logit;
      heads += p.name.find('.') != std::string::npos && p.name.find("bias") == std::string::npos;
    }
    CHECK(heads == 2 * 4);  // 2 layers x 4 heads
    CHECK(total == Approx(a.logit).margin(1e-4));
    const Tensor logits = inf->logits(input, {});
    CHECK(a.logit ==
          Approx(logits.select(0, logits.size(0) - 1).to(DType::f64).data<double>()[target])
              .margin(0));
  }
  const inspect::Lens lens = inspect::logit_lens(*inf, input, 3);
  REQUIRE(lens.layers.size() == 3);  // the embedding and two blocks
  CHECK(same_bits(lens.layers.back().logits, lens.logits));
}

TEST_CASE("induction: generate, lens and heads read the repeat task's symbols") {
  const std::string run = runs().file("2l");
  const RunResult g =
      run_qkv("generate '" + run + "' --prompt abcab --tokens 5 --seed 3 --threads 1");
  INFO(g.output);
  REQUIRE(g.status == 0);
  CHECK(g.output.rfind("abcab", 0) == 0);
  const RunResult bad = run_qkv("generate '" + run + "' --prompt 'ab!' --threads 1");
  CHECK(bad.status == 1);
  CHECK(bad.output.find("not in the model's vocabulary") != std::string::npos);
  CHECK(run_qkv("lens '" + run + "' abcdabc --threads 1").status == 0);
  const RunResult h = run_qkv("heads '" + run + "' --json --threads 1");
  INFO(h.output);
  REQUIRE(h.status == 0);
  const auto j = nlohmann::json::parse(h.output.substr(h.output.find('{')));
  CHECK(j["heads"].size() == 8);
  for (const auto& head : j["heads"]) CHECK(head.contains("induction"));
}

TEST_CASE("induction: the 1-layer config trains, and an attention-only encoder-decoder") {
  const TempDir dir("induction_more");
  const RunResult one = train_run("induction-1l.toml", dir.file("1l"),
                                  "--train.max_steps 10 --train.eval_every 10 --train.eval_iters 1"
                                  " --data.train_size 50 --data.valid_size 4");
  INFO(one.output);
  CHECK(one.status == 0);
  const RunResult copy =
      train_run("copy.toml", dir.file("copy"),
                "--model.attn_only true --train.max_steps 10 --optim.warmup 2"
                " --train.eval_examples 4 --data.train_size 100 --data.valid_size 4"
                " --data.test_size 4 --model.d_model 16 --model.heads 2");
  INFO(copy.output);
  CHECK(copy.status == 0);
  const RunResult wrong =
      train_run("induction-2l.toml", dir.file("wrong"), "--data.max_len 40 --train.max_steps 1");
  CHECK(wrong.status != 0);
  CHECK(wrong.output.find("data.max_len:") != std::string::npos);
  // episodes of block_size tokens are counted before any is generated
  const RunResult huge = train_run("induction-2l.toml", dir.file("huge"),
                                   "--data.train_size 2000000000 --train.max_steps 1");
  CHECK(huge.status != 0);
  CHECK(huge.output.find("data.train_size: generating") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("huge")));
}
