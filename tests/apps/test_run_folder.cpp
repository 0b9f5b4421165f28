// Round three of docs/reliability.md, through the real qkv binary: nothing a run folder holds may
// hang a reader (a FIFO or a symbolic link to /dev/zero in each place a run folder is read, for
// each command that reads it: refused with one line within a second), and the smaller items:
// a near-zero sampling temperature, a config edited after training, a NUL byte in an input,
// a new run that failed on a full disk then run again.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>

#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return std::string(1, '\'') + s + "'"; }
int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

const char* kTinyCopy =
    " --quiet --threads 1 --data.train_size 100 --data.valid_size 10 --data.test_size 10"
    " --optim.warmup 1 --model.d_model 16 --model.heads 2 --model.d_ff 32"
    " --model.encoder_layers 1 --model.decoder_layers 1 --train.max_steps 8"
    " --train.eval_every 4 --checkpoint.every 4";
const char* kTinyLm =
    " --quiet --threads 1 --model.d_model 16 --model.d_ff 32 --model.decoder_layers 1"
    " --model.heads 2 --data.block_size 16 --model.max_len 16 --data.batch_size 8"
    " --train.max_steps 6 --train.eval_every 3 --train.eval_iters 1 --optim.warmup 1"
    " --checkpoint.every 3";

// Trained once for every case of this file.
const std::string& trained(const std::string& which) {
  static std::map<std::string, std::string> runs;
  static const std::string root = [] {
    const fs::path p = fs::temp_directory_path() / ("qkv_run_folder_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::temp_directory_path() / ("qkv_run_folder_" + std::to_string(::getpid())),
                     ec);
    });
    return p.string();
  }();
  if (!runs.count(which)) {
    const std::string dir = root + "/" + which;
    const std::string args = which == "copy" ? "train " + shipped_config("copy.toml") +
                                                   " --run-dir " + quoted(dir) + kTinyCopy
                                             : "train " + shipped_config("shakespeare-char.toml") +
                                                   " --run-dir " + quoted(dir) + kTinyLm;
    const RunResult r = run_qkv(args);
    INFO(r.output);
    REQUIRE(r.status == 0);
    runs[which] = dir;
  }
  return runs[which];
}

std::string pointer(const std::string& run, const char* name) {
  std::ifstream in(run + "/checkpoints/" + name);
  std::string n;
  in >> n;
  return n;
}

// A shell command line (sh -c), its output and exit code.
RunResult run_shell(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

struct Timed {
  RunResult r;
  double seconds = 0;
};

// `qkv ARGS`, killed after 10 s (a hang then fails the case instead of the whole test binary).
Timed run_timed(const std::string& args) {
  const auto start = std::chrono::steady_clock::now();
  Timed t;
  t.r = run_qkv("-s KILL 10 " + quoted(qkv_binary()) + " " + args, "/usr/bin/timeout");
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

// Replaces `place` inside folder by a FIFO nobody writes, or a symbolic link to /dev/zero.
void plant(const std::string& folder, const std::string& place, bool fifo) {
  const std::string path = folder + "/" + place;
  fs::remove(path);
  if (fifo)
    REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  else
    fs::create_symlink("/dev/zero", path);
}

// The commands that read each place of a run folder (RUN: the folder, OUT: a scratch path).
struct Place {
  std::string path;  // inside the run folder; CKPT: the latest checkpoint's folder
  std::vector<std::string> commands;
};

std::string command(const std::string& c, const std::string& run, const std::string& out) {
  if (c == "eval") return "eval " + quoted(run) + " --threads 1";
  if (c == "translate") return "translate " + quoted(run) + " '1 2 3' --threads 1";
  if (c == "generate") return "generate " + quoted(run) + " --prompt a --tokens 3 --quiet";
  if (c == "report") return "report " + quoted(run) + " --out " + quoted(out + ".html");
  if (c == "average") return "average " + quoted(run) + " --last 1 --out " + quoted(out);
  if (c == "resume") return "train --resume " + quoted(run) + " --quiet";
  FAIL("unknown command " << c);
  return "";
}

void check_places(const std::string& source, const std::vector<Place>& places) {
  const std::string ckpt = "checkpoints/" + pointer(source, "latest");
  REQUIRE(pointer(source, "best") == pointer(source, "latest"));
  const fs::path scratch = fs::path(source).parent_path() / "scratch";
  for (const Place& p : places)
    for (const bool fifo : {true, false})
      for (const std::string& c : p.commands) {
        std::string place = p.path;
        if (place.rfind("CKPT/", 0) == 0) place = ckpt + place.substr(4);
        fs::remove_all(scratch);
        fs::copy(source, scratch, fs::copy_options::recursive);
        plant(scratch.string(), place, fifo);
        const Timed t = run_timed(command(c, scratch.string(), scratch.string() + "-out"));
        // A report still renders a run whose checkpoint it cannot read: the page says why.
        const bool in_page = c == "report" && p.path.rfind("CKPT/", 0) == 0;
        const std::string said = in_page ? read_file(scratch.string() + "-out.html") : t.r.output;
        fs::remove_all(scratch.string() + "-out");
        fs::remove(scratch.string() + "-out.html");
        INFO(c << " with " << place << " a " << (fifo ? "FIFO" : "link to /dev/zero") << " ("
               << t.seconds << " s)\n"
               << t.r.output);
        CHECK(t.r.status == (in_page ? 0 : 1));
        if (!in_page) CHECK(lines(t.r.output) == 1);
        CHECK(said.find(fs::path(place).filename().string() + ": not a ") != std::string::npos);
        CHECK(said.find(fifo ? "(it is a FIFO)" : "(it is a device)") != std::string::npos);
        CHECK(t.seconds < 1.0);
      }
  fs::remove_all(scratch);
}

}  // namespace

TEST_CASE("run folder: a FIFO or a /dev/zero link in each place is refused in a second") {
  // A translation run: eval, translate, report, average and resume.
  check_places(trained("copy"),
               {{"config.toml", {"eval", "translate", "report", "resume"}},
                {"src_vocab.txt", {"eval", "translate", "resume"}},
                {"tgt_vocab.txt", {"eval", "translate", "resume"}},
                {"metrics.jsonl", {"report", "resume"}},
                {"provenance.json", {"eval", "resume"}},
                {"checkpoints/latest", {"report", "resume"}},
                {"checkpoints/best", {"eval", "translate"}},
                {"CKPT/manifest.json", {"eval", "translate", "report", "average", "resume"}},
                {"CKPT/model.safetensors", {"eval", "translate", "report", "average", "resume"}},
                {"CKPT/optim.safetensors", {"eval", "average", "resume"}},
                {"CKPT/state.json", {"eval", "translate", "resume"}}});
}

TEST_CASE("run folder: a FIFO or a /dev/zero link in a language model's run, for generate") {
  check_places(trained("lm"), {{"config.toml", {"generate"}},
                               {"tgt_vocab.txt", {"generate"}},
                               {"checkpoints/best", {"generate"}},
                               {"CKPT/model.safetensors", {"generate"}},
                               {"CKPT/manifest.json", {"generate"}}});
}

TEST_CASE("run folder: a checkpoint larger than its manifest records is refused unread") {
  const std::string run = trained("copy");
  const fs::path scratch = fs::path(run).parent_path() / "grown";
  fs::remove_all(scratch);
  fs::copy(run, scratch, fs::copy_options::recursive);
  const std::string model =
      (scratch / "checkpoints" / pointer(run, "latest") / "model.safetensors").string();
  fs::resize_file(model, uint64_t{1} << 34);  // 16 GiB, sparse: reading it would take minutes
  const Timed t = run_timed("translate " + quoted(scratch.string()) + " '1 2 3' --threads 1");
  fs::remove_all(scratch);
  INFO(t.r.output);
  CHECK(t.r.status == 1);
  CHECK(t.r.output.find("model.safetensors: damaged: 17179869184 bytes, the checkpoint recorded") !=
        std::string::npos);
  CHECK(t.seconds < 1.0);
}

TEST_CASE("generate: a temperature too small to divide by is refused, 0 is greedy") {
  const std::string run = trained("lm");
  const RunResult r =
      run_qkv("generate " + quoted(run) + " --prompt a --tokens 3 --temperature 1e-308");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(lines(r.output) == 1);
  CHECK(r.output.find("--temperature must be 0 (greedy) or at least 1e-06, got 1e-308") !=
        std::string::npos);
  CHECK(run_qkv("generate " + quoted(run) + " --prompt a --tokens 3 --temperature 0 --quiet")
            .status == 0);
  CHECK(run_qkv("generate " + quoted(run) + " --prompt a --tokens 3 --temperature 1e-6 --quiet")
            .status == 0);
}

TEST_CASE("eval: a config edited after training names the key, not an index") {
  const std::string run = trained("copy");
  const fs::path scratch = fs::path(run).parent_path() / "edited";
  fs::remove_all(scratch);
  fs::copy(run, scratch, fs::copy_options::recursive);
  std::string toml;
  {
    std::ifstream in(scratch / "config.toml");
    toml.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = toml.find("vocab_size = ");
  REQUIRE(at != std::string::npos);
  toml.replace(at, toml.find('\n', at) - at, "vocab_size = 20");
  std::ofstream(scratch / "config.toml") << toml;
  for (const char* c : {"eval", "translate"}) {
    const RunResult r = run_qkv(command(c, scratch.string(), ""));
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(lines(r.output) == 1);
    CHECK(
        r.output.find("config.toml: its [data] section makes a vocabulary of 24 tokens, not the") !=
        std::string::npos);
    CHECK(r.output.find("data.vocab_size") != std::string::npos);
    CHECK(r.output.find("index_select") == std::string::npos);
  }
  fs::remove_all(scratch);
}

TEST_CASE("translate: a NUL byte in an input is shown, not the end of the message") {
  const std::string run = trained("copy");
  const RunResult p = run_shell("printf '1 a\\000b 2\\n' | " + quoted(qkv_binary()) +
                                " translate " + quoted(run) + " --threads 1");
  INFO(p.output);
  CHECK(p.status == 1);
  CHECK(p.output.find("symbol 'a\\x00b' is not in the task's vocabulary") != std::string::npos);
}

TEST_CASE("train: a new run that failed writing its folder (a full disk) runs again") {
  TempDir t("rerun_full");
  const std::string run = t.file("run");
  const std::string train =
      "train " + shipped_config("copy.toml") + " --run-dir " + quoted(run) + kTinyCopy;
  // ulimit -f 0: every write into a file fails (EFBIG, SIGXFSZ ignored), as on a full disk.
  const RunResult full =
      run_shell("ulimit -f 0; trap '' XFSZ; exec " + quoted(qkv_binary()) + " " + train);
  INFO(full.output);
  CHECK(full.status == 1);
  CHECK(lines(full.output) == 1);
  REQUIRE(fs::exists(run + "/.lock"));
  CHECK(!fs::exists(run + "/config.toml"));
  const RunResult again = run_qkv(train);
  INFO(again.output);
  CHECK(again.status == 0);
  CHECK(fs::exists(run + "/checkpoints/latest"));
}
