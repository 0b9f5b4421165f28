// Decoding inputs have bounds, refused up front with one line naming the option that raises
// them: a runaway translate line (--max-input) and a length-generalisation split this machine
// cannot hold (eval --max-len, with the memory estimate training uses).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "support/process.hpp"

using namespace qkv::testing;

namespace {

std::string repeated(const std::string& symbol, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + symbol;
  return s;
}

// A copy run of four steps: enough to decode with.
std::string tiny_run(const TempDir& t) {
  const std::string run = t.file("run");
  const RunResult tr = run_qkv("train " + source_dir() + "/configs/copy.toml --run-dir " + run +
                               " --train.max_steps 4 --optim.warmup 1 --data.train_size 40"
                               " --data.valid_size 4 --data.test_size 4 --quiet");
  INFO(tr.output);
  REQUIRE(tr.status == 0);
  return run;
}

}  // namespace

TEST_CASE("decode bounds: translate refuses an input past --max-input, and --max-input raises it",
          "[e2e]") {
  TempDir t("decode_bounds");
  const std::string run = tiny_run(t);
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = run_qkv("translate " + run + " '" + repeated("3", 5000) + "'");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("translate: the input has 5000 tokens, more than --max-input 1024") !=
        std::string::npos);
  CHECK(r.output.find('\n') == r.output.size() - 1);  // one line
  CHECK(secs < 5);                                    // refused before any decoding
  const RunResult raised =
      run_qkv("translate " + run + " --max-input 1500 --max-len 3 '" + repeated("3", 1200) + "'");
  INFO(raised.output);
  CHECK(raised.status == 0);
}

TEST_CASE("decode bounds: eval --max-len past this machine's memory is refused with the estimate",
          "[e2e]") {
  TempDir t("decode_bounds_eval");
  const std::string run = tiny_run(t);
  const RunResult r = run_qkv("eval " + run + " --max-len 100000");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("eval --max-len: regenerating") != std::string::npos);
  CHECK(r.output.find("more than the") != std::string::npos);
}
