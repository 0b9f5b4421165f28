// training::train (training/train.hpp) called in process against `qkv train` run by the binary:
// the same run folder byte for byte, every metrics.jsonl record handed to on_record in order,
// and a stop requested from another thread or a callback ending the run as SIGINT does (a
// checkpoint, exit code 130, a resume to exactly the uninterrupted result).
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "support/process.hpp"
#include "training/train.hpp"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;
using Overrides = std::vector<std::pair<std::string, std::string>>;

namespace {

// tests/apps/test_train.cpp's small copy run: 2000 examples, dropout on (so the dropout RNG must
// resume too), a checkpoint every 10 steps, validations at 20, 40, 60.
const Overrides kSmall = {{"threads", "1"},           {"data.train_size", "2000"},
                          {"data.valid_size", "100"}, {"data.test_size", "100"},
                          {"model.dropout", "0.1"},   {"train.max_steps", "60"},
                          {"train.log_every", "5"},   {"train.eval_every", "20"},
                          {"checkpoint.every", "10"}, {"optim.warmup", "10"}};

// o with key set to value (replaced where o has it).
Overrides with(Overrides o, const std::string& key, const std::string& value) {
  for (auto& [k, v] : o)
    if (k == key) {
      v = value;
      return o;
    }
  o.emplace_back(key, value);
  return o;
}

std::string copy_config() { return source_dir() + "/configs/copy.toml"; }

// `qkv train CONFIG --run-dir DIR --quiet --key value ...` through the binary.
RunResult train_cli(const std::string& config, const std::string& dir, const Overrides& o) {
  std::string args = "train '" + config + "' --run-dir '" + dir + "' --quiet";
  for (const auto& [k, v] : o) args += " --" + k + " " + v;
  return run_qkv(args);
}

training::TrainRequest request(const std::string& config, const std::string& dir,
                               const Overrides& o) {
  training::TrainRequest r;
  r.config = config;
  r.run_dir = dir;
  r.overrides = o;
  r.quiet = true;
  return r;
}

// Every file under a folder, by its path in the folder.
std::map<std::string, std::string> files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path());
  return out;
}

// The probe's wall-clock seconds, the one field of a record that is not a function of the run.
std::string without_seconds(const std::string& text) {
  return std::regex_replace(text, std::regex("\"seconds\":[0-9.e+-]+"), "\"seconds\":T");
}

// provenance.json without "openmp_wait": how this process's idle threads wait, chosen from the
// machine's load as the qkv binary starts (core/openmp_wait.hpp), a fact of the process.
nlohmann::json without_wait(const std::string& provenance) {
  nlohmann::json j = nlohmann::json::parse(provenance);
  j.erase("openmp_wait");
  return j;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("training: the library call writes the run folder qkv train writes, byte for byte",
          "[e2e]") {
  TempDir t("training_same");
  const ThreadGuard threads;
  const RunResult cli = train_cli(copy_config(), t.file("cli"), kSmall);
  INFO(cli.output);
  REQUIRE(cli.status == 0);
  const training::TrainResult r = training::train(request(copy_config(), t.file("lib"), kSmall));
  CHECK(r.reason == train::StopReason::completed);
  CHECK(r.exit_code == 0);
  CHECK(r.step == 60);
  CHECK(r.final_line.find("test (100 examples") != std::string::npos);
  const auto a = files(t.file("cli")), b = files(t.file("lib"));
  REQUIRE(a.size() == b.size());
  CHECK(a.count("loss.svg") == 1);
  CHECK(a.count("checkpoints/step-00000060/model.safetensors") == 1);
  for (const auto& [name, bytes] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    if (name == "provenance.json") {
      nlohmann::json pa = without_wait(bytes), pb = without_wait(b.at(name));
      INFO("qkv's identity: the qkv binary and this test built from other sources? build both");
      CHECK(pa["qkv"] == pb["qkv"]);
      pa.erase("qkv"), pb.erase("qkv");
      CHECK(pa == pb);
    } else
      CHECK(bytes == b.at(name));
  }
}

TEST_CASE("training: with a probe, the folder matches qkv train's but for the probe's seconds",
          "[e2e]") {
  TempDir t("training_probe");
  const ThreadGuard threads;
  const Overrides o = with(with(kSmall, "train.max_steps", "20"), "probe.every", "10");
  REQUIRE(train_cli(copy_config(), t.file("cli"), o).status == 0);
  training::train(request(copy_config(), t.file("lib"), o));
  const std::string m = read_file(t.file("cli/metrics.jsonl"));
  CHECK(m.find("\"probe\"") != std::string::npos);
  CHECK(without_seconds(m) == without_seconds(read_file(t.file("lib/metrics.jsonl"))));
  // The weights and the optimizer's state; a checkpoint's state.json and manifest count the
  // bytes of metrics.jsonl, which the seconds' digits change.
  for (const char* f : {"model.safetensors", "optim.safetensors"}) {
    INFO(f);
    const std::string p = std::string("/checkpoints/step-00000020/") + f;
    CHECK(read_file(t.file("cli") + p) == read_file(t.file("lib") + p));
  }
  CHECK(read_file(t.file("cli/loss.svg")) == read_file(t.file("lib/loss.svg")));
}

TEST_CASE("training: a config given as text trains as its file does", "[e2e]") {
  TempDir t("training_text");
  const ThreadGuard threads;
  const Overrides o = with(with(kSmall, "train.max_steps", "10"), "optim.warmup", "2");
  training::train(request(copy_config(), t.file("file"), o));
  training::TrainRequest req = request("", t.file("text"), o);
  req.config_text = read_file(copy_config());
  training::train(req);
  for (const char* f :
       {"metrics.jsonl", "config.toml", "checkpoints/step-00000010/model.safetensors"}) {
    INFO(f);
    CHECK(read_file(t.file("file/") + f) == read_file(t.file("text/") + f));
  }
  // its errors name the file the text stands for
  training::TrainRequest named = request("copy-from-text.toml", "", o);
  named.config_text = "this = [is not TOML";
  CHECK_THROWS_WITH(training::train(named), Catch::Contains("copy-from-text.toml"));
}

TEST_CASE("training: on_record sees exactly the records of metrics.jsonl, in order", "[e2e]") {
  TempDir t("training_records");
  const ThreadGuard threads;
  const Overrides o = with(with(kSmall, "train.max_steps", "20"), "probe.every", "10");
  std::vector<std::string> seen;
  training::TrainCallbacks cb;
  cb.on_record = [&](const nlohmann::json& j) { seen.push_back(j.dump()); };
  training::train(request(copy_config(), t.file("run"), o), cb);
  const std::vector<std::string> logged = lines(read_file(t.file("run/metrics.jsonl")));
  CHECK(seen == logged);
  // each kind of record: training, validation, the probe's, the final test's
  std::map<std::string, int> kinds;
  for (const std::string& s : seen) {
    const nlohmann::json j = nlohmann::json::parse(s);
    ++kinds[j.contains("probe")   ? "probe"
            : j.contains("split") ? j["split"].get<std::string>()
                                  : "train"];
  }
  CHECK(kinds["train"] == 4);  // steps 5, 10, 15, 20
  CHECK(kinds["valid"] == 1);  // step 20
  CHECK(kinds["probe"] == 3);  // steps 0, 10, 20
  CHECK(kinds["test"] == 1);
}

TEST_CASE("training: a stop requested from another thread resumes to the uninterrupted result",
          "[e2e]") {
  TempDir t("training_stop");
  const ThreadGuard threads;
  const std::string a = t.file("a"), b = t.file("b");
  REQUIRE(training::train(request(copy_config(), a, kSmall)).exit_code == 0);

  // A timer thread asks for the stop once step 20 is logged; the training thread waits for the
  // request there, so the run stops at the boundary of step 20 (after its validation and
  // checkpoint) on every machine.
  training::StopToken stop;
  std::mutex mu;
  std::condition_variable cv;
  bool reached = false, asked = false;
  std::thread timer([&] {
    std::unique_lock<std::mutex> hold(mu);
    cv.wait(hold, [&] { return reached; });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop.request();
    asked = true;
    cv.notify_all();
  });
  training::TrainCallbacks cb;
  cb.stop = &stop;
  cb.on_record = [&](const nlohmann::json& j) {
    if (j.value("step", 0) != 20 || j.contains("split")) return;
    std::unique_lock<std::mutex> hold(mu);
    reached = true;
    cv.notify_all();
    cv.wait_for(hold, std::chrono::seconds(120), [&] { return asked; });
  };
  const training::TrainResult r = training::train(request(copy_config(), b, kSmall), cb);
  {
    // a run that never logged step 20 releases the timer too (and fails the checks below)
    const std::lock_guard<std::mutex> hold(mu);
    reached = true;
    cv.notify_all();
  }
  timer.join();
  CHECK(r.reason == train::StopReason::requested);
  CHECK(r.exit_code == 130);  // as SIGINT
  CHECK(r.step == 20);
  CHECK(r.checkpoint == "step-00000020");
  CHECK(r.final_line.empty());
  CHECK(!fs::exists(b + "/checkpoints/step-00000030"));

  training::TrainRequest resume;
  resume.resume = b;
  resume.quiet = true;
  const training::TrainResult done = training::train(resume);
  CHECK(done.reason == train::StopReason::completed);
  CHECK(done.step == 60);
  CHECK(read_file(a + "/metrics.jsonl") == read_file(b + "/metrics.jsonl"));
  for (const char* f : {"model.safetensors", "optim.safetensors"}) {
    INFO(f);
    const std::string p = std::string("/checkpoints/step-00000060/") + f;
    CHECK(read_file(a + p) == read_file(b + p));
  }
}

TEST_CASE("training: should_stop stops at that step boundary with a checkpoint, exit code 130",
          "[e2e]") {
  TempDir t("training_poll");
  const ThreadGuard threads;
  // checkpoint.every = 0: no checkpoint but the validations' (step 20) and the stop's
  const Overrides o = with(kSmall, "checkpoint.every", "0");
  int64_t records = 0;
  training::TrainCallbacks cb;
  cb.on_record = [&](const nlohmann::json&) { ++records; };
  int polls = 0;
  cb.should_stop = [&] { return ++polls > 14; };  // asked at least once a step
  const training::TrainResult r = training::train(request(copy_config(), t.file("run"), o), cb);
  CHECK(r.reason == train::StopReason::requested);
  CHECK(r.exit_code == 130);
  CHECK(r.step >= 7);  // at most twice a step
  CHECK(r.step <= 14);
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(r.step));
  CHECK(r.checkpoint == name);
  CHECK(fs::exists(t.file("run/checkpoints/") + name + "/model.safetensors"));
  CHECK(records >= 1);  // step 5's
  CHECK(records == static_cast<int64_t>(lines(read_file(t.file("run/metrics.jsonl"))).size()));
}
