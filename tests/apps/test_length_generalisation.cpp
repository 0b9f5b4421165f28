// qkv eval --max-len / --min-len through the real binary: the synthetic split regenerated at
// other lengths with the same seeds, learned positions stopping at model.max_len, and a clear
// error for data that cannot be regenerated.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using namespace qkv::testing;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// A tiny, short training: what is tested is the evaluation, not the model's quality.
const std::string kTiny =
    " --threads 1 --quiet --data.train_size 300 --data.valid_size 30 --data.test_size 30"
    " --train.max_steps 8 --train.eval_examples 10 --optim.warmup 2"
    " --model.d_model 16 --model.d_ff 32 --model.heads 2 --model.encoder_layers 1"
    " --model.decoder_layers 1";

nlohmann::json eval_json(const std::string& args) {
  const RunResult r = run_qkv("eval " + args + " --json --threads 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.output);
}

}  // namespace

TEST_CASE("eval --max-len: the synthetic split regenerated at other lengths", "[e2e]") {
  TempDir t("lengen");
  const std::string run = quoted(t.file("rope"));
  const RunResult tr =
      run_qkv("train " + quoted(source_dir() + "/configs/variants/copy-rope.toml") + " --run-dir " +
              run + kTiny);
  INFO(tr.output);
  REQUIRE(tr.status == 0);

  // every example has length 20: 30 examples of 20 symbols + <eos>
  const auto at20 = eval_json(run + " --split test --min-len 20 --max-len 20");
  CHECK(at20["examples"] == 30);
  CHECK(at20["tokens"] == 30 * 21);
  CHECK(at20["min_len"] == 20);
  CHECK(at20["max_len"] == 20);
  // the run's own lengths with --max-len give exactly the run's own split (same seeds)
  const auto own = eval_json(run + " --split test --max-len 10");
  const auto plain = eval_json(run + " --split test");
  CHECK(own["loss"] == plain["loss"]);
  CHECK(own["exact_match"] == plain["exact_match"]);
  CHECK(own["min_len"] == 1);
  // another range, other examples
  const auto longer = eval_json(run + " --split test --min-len 11 --max-len 20");
  CHECK(longer["loss"] != plain["loss"]);
  CHECK(longer["tokens"].get<int64_t>() >= 30 * 12);

  const RunResult bad = run_qkv("eval " + run + " --min-len 12 --max-len 11");
  CHECK(bad.status != 0);
  CHECK(bad.output.find("--min-len 12") != std::string::npos);
  const RunResult alone = run_qkv("eval " + run + " --min-len 12");
  CHECK(alone.status != 0);
  CHECK(alone.output.find("--max-len") != std::string::npos);
}

TEST_CASE("eval --max-len: learned positions end at model.max_len, text data cannot be regenerated",
          "[e2e]") {
  TempDir t("lengen_learned");
  const std::string run = quoted(t.file("learned"));
  // max_len 16 covers training (10 symbols + <eos>, decoding 10 + 2)
  const RunResult tr =
      run_qkv("train " + quoted(source_dir() + "/configs/variants/copy-learned.toml") +
              " --run-dir " + run + kTiny + " --model.max_len 16 --train.max_decode_extra 2");
  INFO(tr.output);
  REQUIRE(tr.status == 0);
  // up to model.max_len the table has rows (never trained ones): evaluated
  CHECK(eval_json(run + " --split test --min-len 13 --max-len 13")["examples"] == 30);
  const RunResult past = run_qkv("eval " + run + " --split test --max-len 20");
  INFO(past.output);
  CHECK(past.status != 0);
  CHECK(past.output.find("model.max_len") != std::string::npos);

  const std::string dates = quoted(t.file("dates"));
  const RunResult td =
      run_qkv("train " + quoted(source_dir() + "/configs/dates.toml") + " --run-dir " + dates +
              kTiny + " --data.train_size 100 --train.max_steps 4");
  INFO(td.output);
  REQUIRE(td.status == 0);
  const RunResult text = run_qkv("eval " + dates + " --max-len 40");
  INFO(text.output);
  CHECK(text.status != 0);
  CHECK(text.output.find("data.task") != std::string::npos);
  CHECK(text.output.find("cannot be regenerated") != std::string::npos);
}
