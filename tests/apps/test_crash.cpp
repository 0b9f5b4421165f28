// Crash safety through the real binary: `qkv train` killed with SIGKILL at seeded random
// moments after its checkpoints (with a checkpoint every step, many kills land inside the next
// checkpoint's write) always
// leaves a loadable checkpoint, and --resume ends with exactly the uninterrupted run's
// metrics.jsonl and weights. A run killed before its first checkpoint restarts from step 0.
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <fstream>
#include <random>
#include <thread>

#include "nn/safetensors.hpp"
#include "run/run.hpp"
#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

// Small and quick, a checkpoint after every step, dropout on (its RNG must resume too).
const std::vector<std::string> kArgs = {"--threads", "1",
                                        "--quiet",   "--data.train_size",
                                        "300",       "--data.valid_size",
                                        "20",        "--data.test_size",
                                        "20",        "--model.dropout",
                                        "0.1",       "--train.max_steps",
                                        "30",        "--train.log_every",
                                        "3",         "--train.eval_every",
                                        "10",        "--checkpoint.every",
                                        "1",         "--checkpoint.keep",
                                        "2",         "--optim.warmup",
                                        "2"};

std::vector<std::string> fresh_args(const std::string& run) {
  std::vector<std::string> a = {"train", source_dir() + "/configs/copy.toml", "--run-dir", run};
  a.insert(a.end(), kArgs.begin(), kArgs.end());
  return a;
}
std::vector<std::string> resume_args(const std::string& run) {
  return {"train", "--resume", run, "--quiet"};
}

// Runs args to the end; returns the exit code (-1: killed by a signal).
int run_to_end(const std::vector<std::string>& args) {
  int st = 0;
  ::waitpid(spawn_qkv(args), &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The step of the run's newest complete checkpoint (0: none yet).
int64_t latest_step(const std::string& run) {
  std::ifstream f(run + "/checkpoints/latest");
  std::string name;
  if (!(f >> name) || name.rfind("step-", 0) != 0) return 0;
  return std::stoll(name.substr(5));
}

// Starts args, waits until the run has a checkpoint of step >= target, waits `extra` more (a
// random moment of the following steps, often inside the next checkpoint's write), then
// SIGKILLs it. Progress, not wall time, decides when, so the kills land after a checkpoint
// however loaded the machine is. Returns true if the run finished (exit 0) first.
bool kill_at(const std::vector<std::string>& args, const std::string& run, int64_t target,
             std::chrono::microseconds extra) {
  const pid_t pid = spawn_qkv(args);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  int st = 0;
  auto exited = [&] {
    if (::waitpid(pid, &st, WNOHANG) != pid) return false;
    INFO("qkv exited early with status " << st);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    return true;
  };
  while (latest_step(run) < target) {
    if (exited()) return true;
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (const auto until = std::chrono::steady_clock::now() + extra;
       std::chrono::steady_clock::now() < until;)
    if (exited()) return true;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// The checkpoint --resume would take loads: weights into the run's model, the optimizer file,
// the state. Returns its name ("" when there is none).
std::string check_loadable(const std::string& run) {
  const std::string ckpt = qkv::run::find_checkpoint(run, "latest");
  if (ckpt.empty()) return "";
  const qkv::run::LoadedRun r = qkv::run::load_run(run, "latest");
  CHECK(r.checkpoint == ckpt);
  CHECK_FALSE(qkv::nn::load_safetensors(ckpt + "/optim.safetensors").tensors.empty());
  CHECK(fs::exists(fs::path(ckpt) / "state.json"));
  return fs::path(ckpt).filename().string();
}

}  // namespace

TEST_CASE("crash: SIGKILL at random moments, then --resume, equals the uninterrupted run",
          "[e2e]") {
  TempDir t("crash");
  const std::string a = t.file("a"), b = t.file("b");
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run_to_end(fresh_args(a)) == 0);
  const auto whole =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);

  const double step_us = static_cast<double>(whole.count()) / 30;  // 30 steps
  std::mt19937_64 rng(20240610);
  std::uniform_int_distribution<int64_t> steps_on(1, 4);  // checkpoints a process writes first
  std::uniform_real_distribution<double> then(0.0, 1.5);  // and then this many steps' time
  bool finished = false;
  int kills = 0, mid_write = 0;  // mid_write: kills inside a checkpoint write
  for (int i = 0; i < 6 && !finished; ++i) {
    const int64_t target = latest_step(b) + steps_on(rng);
    const auto extra = std::chrono::microseconds(static_cast<int64_t>(then(rng) * step_us));
    finished = kill_at(i == 0 ? fresh_args(b) : resume_args(b), b, target, extra);
    ++kills;
    for (const auto& e : fs::directory_iterator(fs::path(b) / "checkpoints"))
      mid_write += e.path().filename().string().find(".tmp") != std::string::npos;
    const std::string name = check_loadable(b);
    INFO("kill " << kills << " at step >= " << target << " + " << extra.count()
                 << " us: checkpoint '" << name << "'");
    CHECK(!name.empty());
    // Only complete checkpoints carry a name; half-written ones stay .tmp-*.
    for (const auto& e : fs::directory_iterator(fs::path(b) / "checkpoints"))
      if (e.path().filename().string().rfind("step-", 0) == 0) {
        CHECK(fs::exists(e.path() / "model.safetensors"));
        CHECK(fs::exists(e.path() / "optim.safetensors"));
        CHECK(fs::exists(e.path() / "state.json"));
      }
  }
  WARN(kills << " kills, " << mid_write << " landed inside a checkpoint write");
  CHECK(kills >= 3);  // the run survived several kills before it could finish
  REQUIRE(run_to_end(resume_args(b)) == 0);
  CHECK(read_file(a + "/metrics.jsonl") == read_file(b + "/metrics.jsonl"));
  CHECK(read_file(a + "/checkpoints/step-00000030/model.safetensors") ==
        read_file(b + "/checkpoints/step-00000030/model.safetensors"));
  CHECK(read_file(a + "/checkpoints/step-00000030/optim.safetensors") ==
        read_file(b + "/checkpoints/step-00000030/optim.safetensors"));
  CHECK(read_file(a + "/checkpoints/best") == read_file(b + "/checkpoints/best"));
  for (const auto& e : fs::directory_iterator(fs::path(b) / "checkpoints"))
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);  // resume tidied up
}

TEST_CASE("crash: a run killed before its first checkpoint restarts with --resume", "[e2e]") {
  TempDir t("crash_early");
  const std::string a = t.file("a"), b = t.file("b");
  REQUIRE(run_to_end(fresh_args(a)) == 0);
  // Kill as soon as the run folder holds its config, before any checkpoint.
  const pid_t pid = spawn_qkv(fresh_args(b));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(fs::path(b) / "config.toml") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  REQUIRE(fs::exists(fs::path(b) / "config.toml"));
  // With no checkpoint (remove one in case the kill landed late), the folder is refused as a
  // new run and resumed from step 0.
  fs::remove_all(fs::path(b) / "checkpoints");
  std::ofstream(b + "/metrics.jsonl", std::ios::app)
      << "{\"step\": 1, \"torn\n";  // a torn last line
  const RunResult fresh =
      run_qkv("train '" + source_dir() + "/configs/copy.toml' --run-dir " + b + " --quiet");
  CHECK(fresh.status == 1);
  CHECK(fresh.output.find("already exists") != std::string::npos);
  REQUIRE(run_to_end(resume_args(b)) == 0);
  CHECK(read_file(a + "/metrics.jsonl") == read_file(b + "/metrics.jsonl"));
  CHECK(read_file(a + "/checkpoints/step-00000030/model.safetensors") ==
        read_file(b + "/checkpoints/step-00000030/model.safetensors"));
}
