// Round two of docs/reliability.md's errors table, through the real qkv binary: one writer per
// run folder, no silent substitution of config values, checksummed checkpoints, SIGTERM and
// SIGHUP, memory estimated before allocating, and flags that each mean one thing.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "nn/safetensors.hpp"
#include "runfolder/integrity.hpp"
#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return std::string(1, '\'') + s + "'"; }
std::string copy_toml() { return source_dir() + "/configs/copy.toml"; }

// A tiny model trained for a few steps: a second or two per run.
const std::vector<std::string> kTiny = {"--threads", "1",
                                        "--quiet",   "--data.train_size",
                                        "100",       "--data.valid_size",
                                        "10",        "--data.test_size",
                                        "10",        "--optim.warmup",
                                        "1",         "--model.d_model",
                                        "16",        "--model.heads",
                                        "2",         "--model.d_ff",
                                        "32",        "--model.encoder_layers",
                                        "1",         "--model.decoder_layers",
                                        "1",         "--train.eval_every",
                                        "1000"};

std::vector<std::string> train_args(const std::string& run, std::vector<std::string> extra) {
  std::vector<std::string> a = {"train", copy_toml(), "--run-dir", run};
  a.insert(a.end(), kTiny.begin(), kTiny.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) {
    if (!s.empty()) s.push_back(' ');
    s.append(quoted(a));
  }
  return s;
}

// The exit code of pid (-1: killed by a signal).
int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

void expect_error(const std::string& args, int code, const std::vector<std::string>& expect) {
  const RunResult r = run_qkv(args);
  INFO(args << "\n" << r.output);
  CHECK(r.status == code);
  for (const std::string& e : expect) CHECK(r.output.find(e) != std::string::npos);
  if (code == 1) CHECK(lines(r.output) == 1);
}

// The training steps logged in metrics.jsonl, in order.
std::vector<int64_t> logged_steps(const std::string& run) {
  std::vector<int64_t> steps;
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("split")) steps.push_back(j.at("step").get<int64_t>());
  }
  return steps;
}

std::string latest(const std::string& run) {
  std::string n = read_file(run + "/checkpoints/latest");
  n.erase(n.find_last_not_of('\n') + 1);
  return run + "/checkpoints/" + n;
}

// Waits until path holds at least n lines (or the process ends); false on timeout.
bool wait_lines(const std::string& path, int n, pid_t pid) {
  for (int i = 0; i < 3000; ++i) {
    if (lines(read_file(path)) >= n) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void flip_byte(const std::string& file, int64_t from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  f.seekp(-from_end, std::ios::end);
  c = static_cast<char>(c ^ 0x10);
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("reliability: one writer per run folder", "[e2e]") {
  TempDir t("rel_lock");
  const std::string run = t.file("run");
  REQUIRE(run_qkv(joined(train_args(run, {"--train.max_steps", "4"}))).status == 0);

  // A lock held by another process (here: this test): resume refuses, naming folder and PID.
  {
    const int fd = ::open((run + "/.lock").c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    expect_error("train --resume " + quoted(run) + " --quiet", 1,
                 {"run folder " + run + " is in use", "process " + std::to_string(::getpid())});
    ::close(fd);
  }
  // Two new trainings into one folder at once (seeds 1 and 2): one trains, the other is
  // refused, and the log holds one run's steps, each once.
  const std::string race = t.file("race");
  const std::vector<std::string> extra = {"--train.max_steps", "20", "--train.log_every", "1"};
  std::vector<std::string> a1 = train_args(race, extra), a2 = train_args(race, extra);
  a1.insert(a1.end(), {"--seed", "1"});
  a2.insert(a2.end(), {"--seed", "2"});
  const pid_t p1 = spawn_qkv(a1, t.file("out1")), p2 = spawn_qkv(a2, t.file("out2"));
  const int c1 = wait_exit(p1), c2 = wait_exit(p2);
  const std::string o1 = read_file(t.file("out1")), o2 = read_file(t.file("out2"));
  INFO(o1 << "\n" << o2);
  CHECK(((c1 == 0 && c2 == 1) || (c1 == 1 && c2 == 0)));
  const std::string& loser = c1 == 0 ? o2 : o1;
  CHECK((loser.find("is in use") != std::string::npos ||
         loser.find("already exists") != std::string::npos));
  std::vector<int64_t> want(20);
  for (int i = 0; i < 20; ++i) want[i] = i + 1;
  CHECK(logged_steps(race) == want);
  CHECK(run_qkv("eval " + quoted(race)).status == 0);

  // Two resumes of one run at once: each step is still logged once, and the log ends as the
  // uninterrupted run's did.
  const std::string full = read_file(race + "/metrics.jsonl");
  const std::string r = t.file("resumed");
  fs::copy(race, r, fs::copy_options::recursive);
  REQUIRE(run_qkv(joined(train_args(t.file("mid"),
                                    {"--train.max_steps", "20", "--train.log_every", "1",
                                     "--checkpoint.every", "10", "--seed", c1 == 0 ? "1" : "2"})))
              .status == 0);
  fs::remove_all(r);
  fs::copy(t.file("mid"), r, fs::copy_options::recursive);
  fs::remove_all(r + "/checkpoints/step-00000020");
  std::ofstream(r + "/checkpoints/latest") << "step-00000010\n";
  std::ofstream(r + "/checkpoints/best") << "step-00000010\n";
  const pid_t q1 = spawn_qkv({"train", "--resume", r, "--quiet"}, t.file("r1"));
  const pid_t q2 = spawn_qkv({"train", "--resume", r, "--quiet"}, t.file("r2"));
  const int d1 = wait_exit(q1), d2 = wait_exit(q2);
  INFO(read_file(t.file("r1")) << "\n" << read_file(t.file("r2")));
  CHECK((d1 == 0 || d2 == 0));
  for (const auto& [code, out] : {std::pair{d1, t.file("r1")}, std::pair{d2, t.file("r2")}})
    if (code != 0) CHECK(read_file(out).find("is in use") != std::string::npos);
  CHECK(logged_steps(r) == want);
  CHECK(read_file(r + "/metrics.jsonl") == read_file(t.file("mid") + "/metrics.jsonl"));
}

TEST_CASE("reliability: eval reads a consistent checkpoint while training removes old ones",
          "[e2e]") {
  TempDir t("rel_readers");
  const std::string run = t.file("run");
  const pid_t p = spawn_qkv(train_args(run, {"--train.max_steps", "150", "--checkpoint.every", "1",
                                             "--checkpoint.keep", "1", "--train.log_every", "1"}),
                            t.file("out"));
  for (int i = 0; i < 3000 && !fs::exists(run + "/checkpoints/latest"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  int evals = 0, failed = 0;
  std::string failure;
  while (::waitpid(p, nullptr, WNOHANG) == 0) {
    const RunResult r = run_qkv("eval " + quoted(run) + " --checkpoint latest");
    ++evals;
    if (r.status != 0) ++failed, failure = r.output;
  }
  INFO(failure);
  CHECK(evals >= 1);
  CHECK(failed == 0);
}

TEST_CASE("reliability: SIGTERM and SIGHUP checkpoint like Ctrl-C, then exit 143 and 129",
          "[e2e]") {
  TempDir t("rel_signals");
  const std::string run = t.file("run");
  // epochs = 0: max_steps alone bounds the run. copy.toml's 12 epochs are only 24 steps here,
  // and a resumed run that reached them before the SIGHUP landed ended with 0.
  const std::vector<std::string> args = train_args(
      run, {"--train.epochs", "0", "--train.max_steps", "100000", "--train.log_every", "1"});
  const pid_t p = spawn_qkv(args, t.file("out"));
  REQUIRE(wait_lines(run + "/metrics.jsonl", 3, p));
  ::kill(p, SIGTERM);
  CHECK(wait_exit(p) == 143);
  const std::string out = read_file(t.file("out"));
  INFO(out);
  CHECK(out.find("interrupted (SIGTERM)") != std::string::npos);
  REQUIRE(fs::exists(run + "/checkpoints/latest"));
  const std::string first = latest(run);

  const int before = lines(read_file(run + "/metrics.jsonl"));
  const pid_t q = spawn_qkv({"train", "--resume", run, "--quiet"}, t.file("out2"));
  REQUIRE(wait_lines(run + "/metrics.jsonl", before + 3, q));
  ::kill(q, SIGHUP);
  CHECK(wait_exit(q) == 129);
  INFO(read_file(t.file("out2")));
  CHECK(read_file(t.file("out2")).find("interrupted (SIGHUP)") != std::string::npos);
  CHECK(latest(run) > first);
  CHECK(run_qkv("eval " + quoted(run) + " --checkpoint latest").status == 0);
}

TEST_CASE("reliability: NaN, Inf and out-of-range values are refused where they were set",
          "[e2e]") {
  TempDir t("rel_values");
  const std::string base = "train " + quoted(copy_toml()) + " --run-dir " + t.file("run") +
                           " --quiet --threads 1 --train.max_steps 5 --optim.warmup 1 ";
  // Set on the command line: the flag is named.
  for (const char* key : {"lr", "eps", "weight_decay", "factor", "min_lr", "clip_norm",
                          "clip_value", "momentum", "dampening"})
    for (const char* v : {"nan", "inf", "-inf"})
      expect_error(
          base + "--optim." + key + " " + v, 1,
          {std::string("command line: --optim.") + key + ": must be a finite number, got " + v});
  expect_error(base + "--optim.betas '[0.9, nan]'", 1, {"--optim.betas: must be a finite number"});
  expect_error(base + "--model.layer_norm_eps inf", 1,
               {"--model.layer_norm_eps: must be a finite number, got inf"});
  expect_error(base + "--train.label_smoothing nan", 1, {"--train.label_smoothing"});
  expect_error(base + "--optim.lr fast", 1, {"--optim.lr: expected a number, got string"});
  expect_error(base + "--data.year_min 99999999999", 1, {"--data.year_min", "out of range"});
  expect_error(base + "--threads -5", 1, {"command line: --threads: must be >= 0"});
  expect_error(base + "--train.epochs -1", 1, {"--train.epochs: must be >= 0"});
  // Set in the file: file and line.
  std::ofstream(t.file("nan.toml")) << "[optim]\nname = \"adam\"\nlr = nan\n";
  expect_error("train " + quoted(t.file("nan.toml")) + " --run-dir " + t.file("run"), 1,
               {"nan.toml:3: optim.lr: must be a finite number, got nan"});
  // A command-line value that makes a key of the file wrong is blamed on the flag.
  std::ofstream(t.file("heads.toml")) << "[model]\nd_model = 96\nheads = 3\n";
  expect_error(
      "train " + quoted(t.file("heads.toml")) + " --run-dir " + t.file("run") +
          " --model.d_model 100",
      1,
      {"command line: --model.d_model 100: model.heads: d_model 100 is not divisible by heads 3",
       "heads set at " + t.file("heads.toml") + ":3"});
  CHECK(!fs::exists(t.path / "run"));
  // epochs = 0 with max_steps: max_steps steps (not "a run of 0 steps").
  const RunResult r = run_qkv(
      joined(train_args(t.file("steps"), {"--train.epochs", "0", "--train.max_steps", "3"})));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(logged_steps(t.file("steps")).back() == 3);
}

TEST_CASE("reliability: a directory, FIFO or device is not a config, a BOM is fine", "[e2e]") {
  TempDir t("rel_files");
  const std::string run = " --run-dir " + t.file("run") + " --quiet";
  expect_error("train /etc" + run, 1, {"/etc: not a config file (it is a directory)"});
  REQUIRE(::mkfifo(t.file("fifo").c_str(), 0644) == 0);
  expect_error("train " + t.file("fifo") + run, 1, {"fifo: not a config file (it is a FIFO)"});
  expect_error("train /dev/zero" + run, 1, {"/dev/zero: not a config file (it is a device)"});
  CHECK(!fs::exists(t.path / "run"));
  // A UTF-8 byte order mark before the first key.
  std::ofstream(t.file("bom.toml")) << "\xEF\xBB\xBFseed = 3\n[train]\nmax_steps = 2\n";
  std::vector<std::string> a = train_args(t.file("bom"), {});
  a[1] = t.file("bom.toml");
  const RunResult r = run_qkv(joined(a));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(read_file(t.file("bom") + "/config.toml").find("seed = 3") != std::string::npos);
}

TEST_CASE("reliability: damaged checkpoints are refused, naming the file", "[e2e]") {
  TempDir t("rel_damage");
  const std::string run = t.file("run");
  REQUIRE(run_qkv(joined(train_args(run, {"--train.max_steps", "6", "--checkpoint.every", "2",
                                          "--checkpoint.keep", "5"})))
              .status == 0);
  // One flipped byte in the weights' data: every reader says which file, and nothing changes.
  const std::string flipped = t.file("flipped");
  fs::copy(run, flipped, fs::copy_options::recursive);
  const std::string model = latest(flipped) + "/model.safetensors";
  flip_byte(model, 5);
  for (const std::string& cmd : {"eval " + quoted(flipped) + " --checkpoint latest",
                                 "translate " + quoted(flipped) + " --checkpoint latest '1 2'",
                                 "train --resume " + quoted(flipped) + " --quiet"})
    expect_error(cmd, 1,
                 {model + ": damaged: its checksum is xxh3", "changed after it was written"});
  // "last good checkpoint" skips it.
  CHECK(qkv::run::last_good_checkpoint(flipped) == flipped + "/checkpoints/step-00000004");

  // Weights made NaN (and the manifest rewritten to match): refused as well.
  const std::string nan = t.file("nan");
  fs::copy(run, nan, fs::copy_options::recursive);
  const std::string nan_model = latest(nan) + "/model.safetensors";
  qkv::nn::SafetensorsFile sf = qkv::nn::load_safetensors(nan_model);
  sf.tensors.front().second.fill_(std::nan(""));
  qkv::nn::save_safetensors(nan_model, sf.tensors, sf.metadata);
  qkv::run::write_manifest(latest(nan));
  expect_error("eval " + quoted(nan) + " --checkpoint latest", 1,
               {nan_model + ": tensor '", "NaN or Inf values"});
  CHECK(qkv::run::last_good_checkpoint(nan) == nan + "/checkpoints/step-00000004");

  // A corrupt state.json: the message is qkv's, not the JSON library's.
  const std::string st = t.file("state");
  fs::copy(run, st, fs::copy_options::recursive);
  std::ofstream(latest(st) + "/state.json") << "{\"step\": 6";
  qkv::run::write_manifest(latest(st));
  const RunResult r = run_qkv("train --resume " + quoted(st) + " --quiet");
  CHECK(r.status == 1);
  CHECK(r.output.find("state.json: corrupt checkpoint state: parse error") != std::string::npos);
  CHECK(r.output.find("json.exception") == std::string::npos);
}

TEST_CASE("reliability: --resume repairs a short or missing metrics.jsonl", "[e2e]") {
  TempDir t("rel_log");
  const std::string run = t.file("run");
  REQUIRE(run_qkv(joined(train_args(run, {"--train.max_steps", "10", "--train.log_every", "1",
                                          "--checkpoint.every", "5", "--checkpoint.keep", "5"})))
              .status == 0);
  const std::string want = read_file(run + "/metrics.jsonl");
  // Back to the step-5 checkpoint, then damage the log.
  auto rewind = [&](const std::string& name) {
    const std::string r = t.file(name);
    fs::copy(run, r, fs::copy_options::recursive);
    fs::remove_all(r + "/checkpoints/step-00000010");
    std::ofstream(r + "/checkpoints/latest") << "step-00000005\n";
    std::ofstream(r + "/checkpoints/best") << "step-00000005\n";
    return r;
  };
  const std::string shortened = rewind("short"), missing = rewind("missing");
  fs::resize_file(shortened + "/metrics.jsonl", 100);
  fs::remove(missing + "/metrics.jsonl");
  for (const std::string& r : {shortened, missing}) {
    const RunResult res = run_qkv("train --resume " + quoted(r) + " --quiet");
    INFO(res.output);
    CHECK(res.status == 0);
    CHECK(res.output.find("restored it from the checkpoint's copy") != std::string::npos);
    const std::string log = read_file(r + "/metrics.jsonl");
    CHECK(log.find('\0') == std::string::npos);  // never NUL padding
    CHECK(log == want);
  }
  // A checkpoint from before the copy existed cannot restore it, and says so.
  const std::string legacy = rewind("legacy");
  fs::remove(legacy + "/checkpoints/step-00000005/metrics.jsonl");
  fs::remove(legacy + "/checkpoints/step-00000005/manifest.json");
  fs::resize_file(legacy + "/metrics.jsonl", 100);
  const RunResult res = run_qkv("train --resume " + quoted(legacy) + " --quiet");
  INFO(res.output);
  CHECK(res.status == 1);
  CHECK(res.output.find("metrics.jsonl is 100 bytes, shorter than the") != std::string::npos);
  CHECK(res.output.find("holds no copy of the log") != std::string::npos);
  CHECK(fs::file_size(legacy + "/metrics.jsonl") == 100);
}

TEST_CASE("reliability: memory is estimated before allocating", "[e2e]") {
  TempDir t("rel_memory");
  expect_error("saturation --keys 30000 --out " + t.file("sat"), 1,
               {"saturation --keys: 30000 keys", "needs about", "of memory available"});
  CHECK(!fs::exists(t.path / "sat"));
  const std::string base = joined(train_args(t.file("run"), {"--train.max_steps", "2"}));
  expect_error(base + " --model.d_model 1000000000", 1,
               {"model.d_model: training this model", "needs about", "of memory available"});
  expect_error(base + " --data.vocab_size 1000000000", 1,
               {"data.vocab_size: a vocabulary of 1000000000 symbols needs about"});
  expect_error(base + " --data.train_size 100000000000", 1,
               {"data.train_size: generating", "needs about"});
  CHECK(!fs::exists(t.path / "run"));
  // Threads far beyond the cores: capped, with a warning, and the run completes.
  const RunResult r = run_qkv(base + " --threads 64");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("threads: 64 threads on") != std::string::npos);
}

TEST_CASE("reliability: every flag means one thing", "[e2e]") {
  TempDir t("rel_flags");
  const std::string run = t.file("run");
  REQUIRE(run_qkv(joined(train_args(run, {"--train.max_steps", "4"}))).status == 0);
  const std::string r = quoted(run);
  expect_error("translate " + r + " --beam 4 --alpha nan '1 2'", 2, {"--alpha"});
  expect_error("translate " + r + " --alpha inf '1 2'", 2, {"--alpha"});
  expect_error("translate " + r + " --checkpoint foo '1 2'", 2, {"--checkpoint"});
  expect_error("eval " + r + " --checkpoint foo", 2, {"--checkpoint"});
  expect_error("eval " + r + " --checkpoint step-00000099", 1,
               {"--checkpoint: " + run + " has no checkpoint step-00000099"});
  CHECK(run_qkv("eval " + r + " --checkpoint step-00000004").status == 0);
  expect_error("eval " + r + " --threads -5", 2, {"--threads"});
  expect_error("translate " + r + " --max-len 0 '1 2'", 2, {"--max-len"});
  expect_error("attention " + r + " '1 2' --out " + t.file("a.svg") + " --layer 0", 2, {"--layer"});
  expect_error("translate " + r + " '1 <eos> 2'", 1, {"'<eos>' is a special token"});
  expect_error("translate " + r + " '<pad>'", 1, {"'<pad>' is a special token"});
  // Blank input lines give blank output lines: outputs line up with inputs.
  std::ofstream(t.file("in.txt")) << "1 2\n\n3 4 5\n   \n6\n";
  const RunResult tr = run_qkv("translate " + r + " < " + quoted(t.file("in.txt")));
  INFO(tr.output);
  CHECK(tr.status == 0);
  CHECK(lines(tr.output) == 5);
  std::istringstream out(tr.output);
  std::vector<std::string> got;
  for (std::string l; std::getline(out, l);) got.push_back(l);
  REQUIRE(got.size() == 5);
  CHECK(got[1].empty());
  CHECK(got[3].empty());
  CHECK(!got[4].empty());
  // A filesystem failure is one plain line, not the library's "filesystem error: ...".
  std::ofstream(t.file("file")) << "x";
  const RunResult fe =
      run_qkv(joined(train_args(t.file("file") + "/run", {"--train.max_steps", "2"})));
  INFO(fe.output);
  CHECK(fe.status == 1);
  CHECK(fe.output.find("filesystem error") == std::string::npos);
  CHECK(fe.output.find(t.file("file") + "/run: cannot create directories: Not a directory") !=
        std::string::npos);
}

TEST_CASE("reliability: under an address-space limit, threads are capped instead of hanging",
          "[e2e]") {
#if defined(__SANITIZE_ADDRESS__)
  QKV_SKIP(
      "under AddressSanitizer: it reserves terabytes of address space, so ulimit -v cannot be "
      "used");
#else
  TempDir t("rel_ulimit");
  // OpenBLAS waits forever for a buffer it cannot map; qkv must fit its threads to the limit.
  const std::string cmd = "ulimit -v 1000000; exec timeout -k 5 120 " + quoted(qkv_binary()) + " " +
                          joined(train_args(t.file("run"), {"--train.max_steps", "3"})) +
                          " --threads 64 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = ::pclose(p);
  INFO(out);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(out.find("threads need about") != std::string::npos);
  CHECK(out.find("(ulimit -v)") != std::string::npos);
#endif
}
