// model.encoder through the real binary: the copy task learned with a GRU encoder under the
// Transformer decoder, and the LSTM and convolutional encoders trained, evaluated and decoded
// (nn/sequence_encoder.hpp).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using namespace qkv::testing;

namespace {

// A copy run of d_model 32 on 3000 examples, one thread: the given encoder and steps.
RunResult train_copy(const TempDir& t, const std::string& encoder, const std::string& length) {
  return run_qkv("train " + shipped_config("copy.toml") + " --run-dir " + t.file(encoder) +
                 " --threads 1 --quiet --model.encoder " + encoder +
                 " --data.train_size 3000 --data.valid_size 100 --data.test_size 200"
                 " --train.eval_examples 100 --model.d_model 32 --model.d_ff 64 --model.heads 2"
                 " --optim.lr 3e-3 --optim.warmup 20 " +
                 length);
}

}  // namespace

TEST_CASE("train: copy with a GRU encoder learns to copy held-out sequences", "[e2e]") {
  TempDir t("gru_copy");
  const RunResult r = train_copy(t, "gru", "--train.epochs 15");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const RunResult e = run_qkv("eval " + t.file("gru") + " --split test --json");
  INFO(e.output);
  REQUIRE(e.status == 0);
  // 0.96 on a 2-core AMD EPYC (8 s; attention 0.97, lstm 0.95, conv 0.975 alike); fixed seed, 1
  // thread
  CHECK(nlohmann::json::parse(e.output)["exact_match"].get<double>() >= 0.9);
  const RunResult x = run_qkv("translate " + t.file("gru") + " '3 1 4 1 5' '9 2 6'");
  CHECK(x.status == 0);
  CHECK(x.output == "3 1 4 1 5\n9 2 6\n");
}

TEST_CASE("train: the LSTM and convolutional encoders train, evaluate and decode", "[e2e]") {
  TempDir t("encoder_kinds");
  for (const std::string encoder : {"lstm", "conv"}) {
    INFO(encoder);
    const RunResult r = train_copy(t, encoder, "--train.max_steps 60 --train.eval_every 60");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const RunResult e = run_qkv("eval " + t.file(encoder) + " --split test --json");
    INFO(e.output);
    CHECK(e.status == 0);
    CHECK(nlohmann::json::parse(e.output).contains("exact_match"));
    const RunResult x = run_qkv("translate " + t.file(encoder) + " --beam 2 '3 1 4'");
    CHECK(x.status == 0);
  }
}
