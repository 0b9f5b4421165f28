// qkv train / eval / translate through the real binary: a model that learns, resume that
// continues exactly, an effective config that re-runs identically, and bad input that gets
// one clear line and a non-zero exit without touching an existing run.
#include <catch2/catch.hpp>
#include <csignal>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

std::string config(const std::string& name) { return shipped_config(name); }

// A small, fast copy run: 2000 examples, dropout on (so the dropout RNG must resume too).
const std::string kSmall =
    " --threads 1 --quiet --data.train_size 2000 --data.valid_size 100 --data.test_size 100"
    " --model.dropout 0.1 --train.max_steps 60 --train.log_every 5 --train.eval_every 20"
    " --checkpoint.every 10 --optim.warmup 10";

}  // namespace

TEST_CASE("train: the default copy config learns to copy held-out sequences", "[e2e]") {
  TempDir t("copy");
  const RunResult r = run_qkv("train " + config("copy.toml") + " --run-dir " + t.file("run") +
                              " --threads 1 --quiet");
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (const char* f :
       {"config.toml", "src_vocab.txt", "tgt_vocab.txt", "metrics.jsonl", "loss.svg"})
    CHECK(fs::exists(t.path / "run" / f));
  const RunResult e = run_qkv("eval " + t.file("run") + " --split test --json");
  INFO(e.output);
  REQUIRE(e.status == 0);
  const auto j = nlohmann::json::parse(e.output);
  for (const char* k : {"loss", "token_accuracy", "exact_match", "examples"}) CHECK(j.contains(k));
  CHECK(j["exact_match"].get<double>() >= 0.95);
  const RunResult x = run_qkv("translate " + t.file("run") + " '3 1 4 1 5' '9 2 6'");
  CHECK(x.status == 0);
  CHECK(x.output == "3 1 4 1 5\n9 2 6\n");
  const RunResult b = run_qkv("translate " + t.file("run") + " --beam 4 '2 7 1 8'");
  CHECK(b.output == "2 7 1 8\n");
}

TEST_CASE("train: an interrupted run resumes to exactly the uninterrupted result", "[e2e]") {
  TempDir t("resume");
  const std::string a = t.file("a"), b = t.file("b");
  REQUIRE(run_qkv("train " + config("copy.toml") + " --run-dir " + a + kSmall).status == 0);

  // Same run, interrupted (Ctrl-C) once a checkpoint exists, then resumed.
  std::vector<std::string> args = {"train", source_dir() + "/configs/copy.toml", "--run-dir", b};
  std::istringstream extra(kSmall);
  for (std::string w; extra >> w;) args.push_back(w);
  const pid_t pid = spawn_qkv(args);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(fs::path(b) / "checkpoints" / "step-00000020") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  const int code = WEXITSTATUS(status);
  CHECK((code == 130 || code == 0));  // 0 if it finished before the signal landed
  const RunResult r = run_qkv("train --resume " + b + " --quiet");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(read_file(a + "/metrics.jsonl") == read_file(b + "/metrics.jsonl"));
  CHECK(read_file(a + "/checkpoints/step-00000060/model.safetensors") ==
        read_file(b + "/checkpoints/step-00000060/model.safetensors"));
  CHECK(read_file(a + "/checkpoints/step-00000060/optim.safetensors") ==
        read_file(b + "/checkpoints/step-00000060/optim.safetensors"));

  // The effective config re-runs identically.
  const RunResult c = run_qkv("train " + a + "/config.toml --run-dir " + t.file("c") + " --quiet");
  REQUIRE(c.status == 0);
  CHECK(read_file(a + "/metrics.jsonl") == read_file(t.file("c") + "/metrics.jsonl"));
}

TEST_CASE("train: bad input gets one clear line and a non-zero exit", "[e2e]") {
  TempDir t("bad");
  const std::string copy = config("copy.toml") + " --quiet";
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"train " + t.file("missing.toml") + " --quiet", "missing.toml"},
      {"train " + copy + " --model.d_modle 64", "model.d_modle"},
      {"train " + copy + " --model.d_model big", "model.d_model"},
      {"train " + copy + " --model.d_model 100 --model.heads 3", "not divisible"},
      {"train " + copy + " --optim.lr -1", "optim.lr"},
      {"train " + copy + " --data.batch_size 0", "data.batch_size"},
      {"train " + copy + " --data.task tsv --data.path " + t.file("none.tsv"), "none.tsv"},
      {"train --resume " + t.file("nowhere") + " --quiet", "nowhere"},
      {"eval " + t.file("nowhere"), "nowhere"},
  };
  for (const Case& c : cases) {
    const RunResult r = run_qkv(c.args);
    INFO(c.args << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find(c.expect) != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  // Command-line misuse: exit 2.
  CHECK(run_qkv("").status == 2);
  CHECK(run_qkv("train --bogus").status == 2);
  CHECK(run_qkv("eval").status == 2);
}

TEST_CASE("train: an existing run folder is never overwritten, corrupt runs are refused", "[e2e]") {
  TempDir t("exists");
  const std::string run = t.file("run");
  REQUIRE(
      run_qkv(
          "train " + config("copy.toml") + " --run-dir " + run +
          " --threads 1 --quiet"
          " --data.train_size 500 --train.max_steps 10 --train.eval_examples 20 --optim.warmup 2")
          .status == 0);
  const std::string metrics = read_file(run + "/metrics.jsonl");
  const RunResult again =
      run_qkv("train " + config("copy.toml") + " --run-dir " + run + " --quiet");
  CHECK(again.status == 1);
  CHECK(again.output.find("already exists") != std::string::npos);
  CHECK(read_file(run + "/metrics.jsonl") == metrics);

  // Symbols outside the vocabulary.
  const RunResult x = run_qkv("translate " + run + " '3 zebra 4'");
  CHECK(x.status == 1);
  CHECK(x.output.find("zebra") != std::string::npos);

  // A truncated checkpoint: resuming and evaluating fail with a message naming the file.
  const fs::path ckpt = fs::path(run) / "checkpoints" / "step-00000010" / "model.safetensors";
  REQUIRE(fs::exists(ckpt));
  fs::resize_file(ckpt, fs::file_size(ckpt) / 2);
  const std::string before = read_file(run + "/metrics.jsonl");
  const RunResult r = run_qkv("train --resume " + run + " --quiet");
  CHECK(r.status == 1);
  CHECK(r.output.find("model.safetensors") != std::string::npos);
  CHECK(read_file(run + "/metrics.jsonl") == before);
  CHECK(run_qkv("eval " + run).status == 1);

  // An incompatible config: the checkpoint does not fit the model it describes.
  TempDir u("incompat");
  const std::string run2 = u.file("run");
  REQUIRE(
      run_qkv(
          "train " + config("copy.toml") + " --run-dir " + run2 +
          " --threads 1 --quiet"
          " --data.train_size 500 --train.max_steps 10 --train.eval_examples 20 --optim.warmup 2")
          .status == 0);
  std::string cfg = read_file(run2 + "/config.toml");
  cfg.replace(cfg.find("d_ff = 256"), 10, "d_ff = 128");
  std::ofstream(run2 + "/config.toml") << cfg;
  const RunResult r2 = run_qkv("train --resume " + run2 + " --quiet");
  CHECK(r2.status == 1);
  CHECK(r2.output.find("does not fit") != std::string::npos);
}
