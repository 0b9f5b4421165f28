// Sizes and work checked before they are spent, through the real binary: [probe] sizes past
// their bounds or past the memory refused before the run folder exists, an allocation that
// fails anyway (on the command's thread or another) one line and no half-made folder, patching
// and the head table refused past their work bound, and scripts/induction-heads.sh stopping
// its other training when one fails, or when it is stopped.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A tiny copy run, trained once for the inspection cases (a second or two).
const std::string& tiny_copy() {
  static TempDir dir("bounds_runs");
  static const std::string run = dir.file("copy");
  static const bool trained = [] {
    const RunResult r = run_qkv(
        "train " + shipped_config("copy.toml") + " --run-dir " + quoted(run) +
        " --threads 1 --quiet --train.max_steps 4 --train.eval_examples 4 --data.train_size 64"
        " --data.valid_size 64 --data.test_size 8 --optim.warmup 1 --model.d_model 16"
        " --model.d_ff 32 --model.heads 2 --data.batch_size 8");
    INFO(r.output);
    REQUIRE(r.status == 0);
    return true;
  }();
  (void)trained;
  return run;
}

// "1 2 3 ..." of n symbols of the copy task (1..10).
std::string symbols(int n, int last) {
  std::string s;
  for (int i = 0; i < n; ++i) s += std::to_string(i + 1 == n ? last : i % 10 + 1) + " ";
  s.pop_back();
  return s;
}

}  // namespace

TEST_CASE("bounds: probe sizes past their bounds or the memory are refused before the folder") {
  TempDir t("bounds_probe");
  const std::string run = t.file("run");
  const std::string lm = "train " + shipped_config("induction-2l.toml") + " --run-dir " +
                         quoted(run) + " --threads 1 --probe.every 5";
  const std::string copy = "train " + shipped_config("copy.toml") + " --run-dir " + quoted(run) +
                           " --threads 1 --probe.every 5";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {lm + " --probe.sequences 300000", "probe.sequences: must be in 1..1000, got 300000"},
           {lm + " --probe.icl_windows 1000000000",
            "probe.icl_windows: must be in 1..1000, got 1000000000"},
           {copy + " --probe.length 1000000", "probe.length: must be in 0..512"},
           // each within its bound, their product past the memory: every sequence's maps kept
           {copy + " --probe.sequences 1000 --probe.length 512",
            "probing this model's heads (1000 sequences of 2 x 512 tokens, every layer's and "
            "head's attention maps kept until scored) needs about"}}) {
    INFO(c.args);
    const Clock::time_point start = Clock::now();
    const RunResult r = run_qkv(c.args);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(lines(r.output) == 1);
    CHECK(r.output.find(c.says) != std::string::npos);
    CHECK(!fs::exists(run));  // so the same command, corrected, runs
    CHECK(since(start) < 20);
  }
  // The probe is in the estimate `qkv config` prints.
  const auto memory = [&](const std::string& extra) {
    const RunResult r = run_qkv("config " + shipped_config("copy.toml") + " --json" + extra);
    INFO(r.output);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.output)["memory"];
  };
  const nlohmann::json plain = memory(""), probed = memory(
                                               " --probe.every 5 --probe.sequences 1000 "
                                               "--probe.length 32");
  CHECK(probed["estimate_bytes"].get<double>() > plain["estimate_bytes"].get<double>() + 1e9);
  CHECK(probed["largest_term"] == "probe.sequences");
}

TEST_CASE("bounds: an allocation that fails is one line and leaves no half-made run folder") {
  TempDir t("bounds_alloc");
  const std::string run = t.file("run");
  const std::string train = "train " + shipped_config("copy.toml") + " --run-dir " + quoted(run) +
                            " --threads 1 --quiet --train.max_steps 2 --data.train_size 32"
                            " --data.valid_size 8 --data.test_size 8 --optim.warmup 1";
  const std::string faulty = env_or("QKV_BUILD_DIR", ".") + "/tests/apps/qkv_alloc_fault";
  for (const char* where : {"main", "thread"}) {
    INFO(where);
    ::setenv("QKV_ALLOC_FAULT", where, 1);
    const RunResult r = run_qkv(train, faulty);
    ::unsetenv("QKV_ALLOC_FAULT");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(lines(r.output) == 1);
    CHECK(r.output.rfind("qkv: out of memory: an allocation failed (std::bad_alloc)", 0) == 0);
    CHECK(r.output.find("removed the unfinished run folder " + run) != std::string::npos);
    CHECK(!fs::exists(run));
  }
  // The same command, now that memory is there, starts the run.
  const RunResult again = run_qkv(train, faulty);
  INFO(again.output);
  CHECK(again.status == 0);
  CHECK(fs::exists(run + "/checkpoints"));
}

TEST_CASE("bounds: patching and the head table past their work bound are refused at once") {
  const std::string run = quoted(tiny_copy());
  // Two 1000-token inputs: 2028 passes of 2011 tokens (minutes), refused before the first.
  const Clock::time_point start = Clock::now();
  const RunResult p = run_qkv("patch " + run + " --threads 1 --clean '" + symbols(1000, 3) +
                              "' --corrupt '" + symbols(1000, 4) + "'");
  INFO(p.output);
  CHECK(p.status == 1);
  CHECK(lines(p.output) == 1);
  CHECK(p.output ==
        "qkv: patch: 2016 passes of 2011 tokens: 4.1M token passes, more than the bound of 400k "
        "(--max-work; use shorter inputs, or raise it)\n");
  CHECK(since(start) < 20);
  // Short inputs run; the same inputs under a lower bound do not.
  const std::string inputs = " --threads 1 --clean '1 2 3 4 5' --corrupt '1 2 3 4 7'";
  CHECK(run_qkv("patch " + run + inputs).status == 0);
  CHECK(run_qkv("patch " + run + inputs + " --max-work 10").status == 1);
  // The head table: every batch of a split asked for, past a bound; by default as many of the
  // first 4 batches as the bound allows.
  const RunResult h = run_qkv("heads " + run + " --threads 1 --batches 0 --max-work 5000");
  INFO(h.output);
  CHECK(h.status == 1);
  CHECK(lines(h.output) == 1);
  CHECK(h.output.find("qkv: heads: 29 passes over every batch of the valid split") == 0);
  CHECK(h.output.find("more than the bound of 5k (--max-work; ask for fewer --batches or "
                      "--probes, or raise it)") != std::string::npos);
  const RunResult fit = run_qkv("heads " + run + " --threads 1 --json --max-work 20000");
  INFO(fit.output);
  REQUIRE(fit.status == 0);
  const int64_t batches = nlohmann::json::parse(fit.output)["batches"].get<int64_t>();
  CHECK(batches >= 1);
  CHECK(batches < 4);
  CHECK(nlohmann::json::parse(run_qkv("heads " + run + " --threads 1 --json").output)["batches"] ==
        4);
}

TEST_CASE("bounds: induction-heads.sh stops its other training when one fails or it is stopped") {
  TempDir t("bounds_script");
  // A stand-in for qkv: records its pid, then either fails (once the other training has
  // started, so that one is running) or trains for two minutes.
  const std::string stub = t.file("qkv");
  std::ofstream(stub) << "#!/bin/bash\ndir='" + t.path.string() + "'\n" + R"SH(
case "$*" in *induction-1l*) me=one other=two ;; *) me=two other=one ;; esac
echo $$ > "$dir/$me.pid"
if [[ "$me" == "$(cat "$dir/fail" 2>/dev/null)" ]]; then
  while [[ ! -f "$dir/$other.pid" ]]; do sleep 0.05; done
  echo "qkv: train: $me failed" >&2
  exit 1
fi
exec sleep 120
)SH";
  fs::permissions(stub, fs::perms::owner_all);
  const std::string script = source_path("scripts/induction-heads.sh");
  const auto pid_of = [&](const std::string& name) {
    return static_cast<pid_t>(std::atoi(read_file(t.file(name + ".pid")).c_str()));
  };
  for (const std::string fail : {"one", "two", ""}) {
    INFO("failing: " << (fail.empty() ? "none, SIGTERM" : fail));
    fs::remove(t.file("one.pid")), fs::remove(t.file("two.pid"));
    std::ofstream(t.file("fail")) << fail;
    const pid_t sh =
        spawn_program("/bin/bash", {script, "--qkv", stub, "--out", t.file("out"), "--seeds", "1"},
                      t.file("log"));
    for (int i = 0; i < 250 && !(fs::exists(t.file("one.pid")) && fs::exists(t.file("two.pid")));
         ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(fs::exists(t.file("one.pid")));
    REQUIRE(fs::exists(t.file("two.pid")));
    if (fail.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::kill(sh, SIGTERM);
    }
    const int code = wait_exit_within(sh, 10);
    const std::string log = read_file(t.file("log"));
    INFO(log);
    CHECK(code == (fail.empty() ? 143 : 1));
    if (!fail.empty())
      CHECK(log.find("induction-heads.sh: the training of " + t.file("out") +
                     (fail == "one" ? "/one-layer-seed1" : "/two-layers-seed1") +
                     " failed (exit 1); stopping the other") != std::string::npos);
    // Neither training outlives the script.
    for (const char* name : {"one", "two"}) {
      const pid_t p = pid_of(name);
      CHECK(!process_alive(p));
      if (process_alive(p)) ::kill(p, SIGKILL);
    }
  }
}
