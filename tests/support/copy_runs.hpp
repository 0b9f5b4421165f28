// What the copy-task tests of the encoder and decoder kinds share (tests/apps/test_bahdanau.cpp,
// test_encoder_kinds.cpp): a small copy run trained through the binary, and the checks of a run
// that learned to copy and of one that merely trains.
#pragma once
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "support/process.hpp"

namespace qkv::testing {

// configs/<config> trained into t.file(name) at d_model 32 on 3000 examples (100 valid, 200
// test, 100 evaluated), one thread, then the options `more`.
inline RunResult train_small_copy(const TempDir& t, const std::string& config,
                                  const std::string& name, const std::string& more) {
  return run_qkv("train " + shipped_config(config) + " --run-dir " + t.file(name) +
                 " --threads 1 --quiet --data.train_size 3000 --data.valid_size 100"
                 " --data.test_size 200 --train.eval_examples 100 --model.d_model 32 " +
                 more);
}

// Run `name` of t copies: exact match of at least 0.9 on its test split, and qkv translate
// gives two inputs back.
inline void check_copies(const TempDir& t, const std::string& name) {
  const RunResult e = run_qkv("eval " + t.file(name) + " --split test --json");
  INFO(e.output);
  REQUIRE(e.status == 0);
  CHECK(nlohmann::json::parse(e.output)["exact_match"].get<double>() >= 0.9);
  const RunResult x = run_qkv("translate " + t.file(name) + " '3 1 4 1 5' '9 2 6'");
  CHECK(x.status == 0);
  CHECK(x.output == "3 1 4 1 5\n9 2 6\n");
}

// Run `name` of t, however well it learned: qkv eval reports its exact match, and qkv translate
// decodes with a beam.
inline void check_evaluates_and_decodes(const TempDir& t, const std::string& name) {
  const RunResult e = run_qkv("eval " + t.file(name) + " --split test --json");
  INFO(e.output);
  CHECK(e.status == 0);
  CHECK(nlohmann::json::parse(e.output).contains("exact_match"));
  CHECK(run_qkv("translate " + t.file(name) + " --beam 2 '3 1 4'").status == 0);
}

}  // namespace qkv::testing
