// Two tiny trained runs for tests that open a run folder, trained once per test process: a
// character GPT (2 layers of 4 heads, d_model 32, block 16) in dir.file("lm") and a copy-task
// encoder-decoder (train_tiny_copy, 20 steps) in dir.file("copy"). A few seconds. And
// train_tiny_classifier, for tests that want the encoder family too.
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "support/process.hpp"

namespace qkv::testing {

// A copy-task encoder-decoder (2 + 2 layers, 2 heads, d_model 32) trained into dir.file(name)
// through the binary: `steps` steps on train_size examples, then `more` options (e.g.
// " --model.norm_first true"). A few seconds.
inline void train_tiny_copy(const TempDir& dir, const std::string& name, int steps, int train_size,
                            const std::string& more = "") {
  const RunResult r =
      run_qkv("train " + shipped_config("copy.toml") + " --run-dir '" + dir.file(name) +
              "' --threads 1 --quiet --train.max_steps " + std::to_string(steps) +
              " --train.eval_examples 10 --data.train_size " + std::to_string(train_size) +
              " --data.valid_size 20 --data.test_size 20 --optim.warmup 10"
              " --model.d_model 32 --model.d_ff 64 --model.heads 2" +
              more);
  INFO(r.output);
  REQUIRE(r.status == 0);
}

// tag names the folder (qkv_<tag>_<pid>); lm_steps: the GPT's training steps.
inline const TempDir& tiny_runs(const char* tag, int lm_steps) {
  static TempDir dir(tag);
  static const bool trained = [&] {
    const std::string src = source_dir(), steps = std::to_string(lm_steps);
    const RunResult lm =
        run_qkv("train '" + src + "/configs/shakespeare-char.toml' --run-dir '" + dir.file("lm") +
                "' --threads 1 --quiet --model.d_model 32 --model.d_ff 64 --model.decoder_layers 2"
                " --data.block_size 16 --model.max_len 16 --data.batch_size 32 --train.max_steps " +
                steps + " --train.eval_every " + steps +
                " --train.eval_iters 2 --optim.warmup 10 --optim.lr 1e-2");
    INFO(lm.output);
    REQUIRE(lm.status == 0);
    train_tiny_copy(dir, "copy", 20, 200);
    return true;
  }();
  (void)trained;
  return dir;
}

// A tiny majority classifier (encoder-only, 2 layers, d_model 32) trained into dir.file(name)
// through the binary: 150 steps, a few seconds. Call it once per folder.
inline void train_tiny_classifier(const TempDir& dir, const std::string& name) {
  const RunResult r =
      run_qkv("train '" + source_dir() + "/configs/majority.toml' --run-dir '" + dir.file(name) +
              "' --threads 1 --quiet --train.max_steps 150 --train.epochs 0 --train.eval_every 50"
              " --data.train_size 2000 --data.valid_size 100 --data.test_size 100 --data.max_len 12"
              " --model.d_model 32 --model.d_ff 64 --model.encoder_layers 2 --optim.warmup 10"
              " --optim.lr 3e-3");
  INFO(r.output);
  REQUIRE(r.status == 0);
}

}  // namespace qkv::testing
