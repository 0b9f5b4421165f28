// qkv config and qkv train --dry-run (the plan, writing nothing), qkv train --overwrite (after
// the lock), and the provenance.json of every run, through the real binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include "config/config.hpp"
#include "runfolder/run_lock.hpp"
#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string quoted(const std::string& s) { return std::string(1, '\'') + s + "'"; }
std::string copy_toml() { return quoted(source_dir() + "/configs/copy.toml"); }
// (qkv config takes no --quiet: it only prints)
const char* const kTiny =
    " --data.train_size 100 --data.valid_size 10 --data.test_size 10 --optim.warmup 1"
    " --model.d_model 16 --model.heads 2 --model.d_ff 32 --model.encoder_layers 1"
    " --model.decoder_layers 1 --train.eval_every 1000 --train.max_steps 2";

RunResult ok(const std::string& args) {
  const RunResult r = run_qkv(args);
  INFO(args << "\n" << r.output);
  REQUIRE(r.status == 0);
  return r;
}

// The parameter count of `qkv train`'s first line ("training R: N parameters, ...").
long long trained_parameters(const std::string& output) {
  std::smatch m;
  REQUIRE(std::regex_search(output, m, std::regex(": ([0-9]+) parameters")));
  return std::stoll(m[1]);
}

}  // namespace

TEST_CASE("qkv config: the effective config with every default and the plan, writing nothing",
          "[e2e]") {
  TempDir t("config_cmd");
  const std::string run = t.file("run");
  const RunResult r =
      ok("config " + copy_toml() + " --run-dir " + quoted(run) + " --threads 0" + kTiny);
  INFO(r.output);
  CHECK(!fs::exists(run));  // nothing written: no folder, no lock
  // The printed config is the one train saves: it reads back, every default in it.
  const std::string text = r.output.substr(0, r.output.find("\n# plan"));
  const qkv::config::RunConfig c =
      qkv::config::config_from_toml(qkv::config::parse_config(text, "printed.toml"));
  CHECK(c.model.d_model == 16);
  CHECK(c.threads >= 1);  // threads = 0 shown as the count it becomes
  for (const char* k :
       {"relative_clip = 16", "eval_iters = 200", "clip_value = 0.0", "keep = 2", "# parameters",
        "# steps            2 (", "# tokens per step", "# memory           about"})
    CHECK(r.output.find(k) != std::string::npos);
  // --json: one object a script reads, with the same numbers train then uses.
  const RunResult j = ok("train " + copy_toml() + " --run-dir " + quoted(run) +
                         " --dry-run --json --quiet --threads 1" + kTiny);
  CHECK(!fs::exists(run));
  const json plan = json::parse(j.output);
  CHECK(plan["config"]["model"]["d_model"] == 16);
  CHECK(plan["steps"] == 2);
  CHECK(plan["steps_per_epoch"].get<int64_t>() >= 1);
  CHECK(plan["tokens_per_step"]["target"].get<double>() > 0);
  CHECK(plan["memory"]["estimate_bytes"].get<double>() > 0);
  CHECK(plan["threads"] == 1);
  const RunResult trained =
      ok("train " + copy_toml() + " --run-dir " + quoted(run) + " --threads 1" + kTiny);
  CHECK(plan["parameters"].get<long long>() == trained_parameters(trained.output));
  // the saved config is the printed one
  CHECK(read_file(run + "/config.toml") == plan["config_toml"].get<std::string>());
  // a bad key in a dry run is the same one-line error as in a run
  const RunResult bad = run_qkv("config " + copy_toml() + " --model.d_modle 3");
  CHECK(bad.status == 1);
  CHECK(bad.output.find("did you mean model.d_model?") != std::string::npos);
}

TEST_CASE("qkv train --overwrite replaces a run folder after taking its lock", "[e2e]") {
  TempDir t("overwrite");
  const std::string run = t.file("run");
  ok("train " + copy_toml() + " --run-dir " + quoted(run) + " --threads 1" + kTiny);
  { std::ofstream(run + "/old-file") << "from the old run\n"; }
  // without --overwrite: today's refusal, nothing touched
  const RunResult refused =
      run_qkv("train " + copy_toml() + " --run-dir " + quoted(run) + " --threads 1" + kTiny);
  CHECK(refused.status == 1);
  CHECK(refused.output.find("already exists") != std::string::npos);
  CHECK(fs::exists(run + "/old-file"));
  // while another process writes it: refused, nothing touched
  {
    qkv::run::RunLock held(run);
    const RunResult busy = run_qkv("train " + copy_toml() + " --run-dir " + quoted(run) +
                                   " --overwrite --threads 1" + kTiny);
    CHECK(busy.status == 1);
    CHECK(busy.output.find("is in use") != std::string::npos);
    CHECK(fs::exists(run + "/old-file"));
  }
  // a config error: the old run stays
  CHECK(run_qkv("train " + copy_toml() + " --run-dir " + quoted(run) + " --overwrite" + kTiny +
                " --model.heads 3")
            .status == 1);
  CHECK(fs::exists(run + "/old-file"));
  ok("train " + copy_toml() + " --run-dir " + quoted(run) + " --overwrite --threads 1" + kTiny +
     " --seed 7");
  CHECK(!fs::exists(run + "/old-file"));
  CHECK(read_file(run + "/config.toml").find("seed = 7") != std::string::npos);
  // a folder that is not a run folder is never emptied
  fs::create_directories(t.path / "mine");
  { std::ofstream(t.file("mine/notes.txt")) << "mine\n"; }
  const RunResult notrun = run_qkv("train " + copy_toml() + " --run-dir " + quoted(t.file("mine")) +
                                   " --overwrite" + kTiny);
  CHECK(notrun.status == 1);
  CHECK(notrun.output.find("is not a run folder") != std::string::npos);
  CHECK(fs::exists(t.file("mine/notes.txt")));
  CHECK(run_qkv("train --resume " + quoted(run) + " --overwrite").status == 2);
}

TEST_CASE(
    "provenance: each run records what built and ran it, and eval and resume notice new kernels",
    "[e2e]") {
  TempDir t("provenance");
  const std::string run = t.file("run");
  ok("train " + copy_toml() + " --run-dir " + quoted(run) + " --threads 0" + kTiny);
  const json p = json::parse(read_file(run + "/provenance.json"));
  INFO(p.dump(2));
  CHECK(p["qkv"]["version"] == "0.1.0");
  const std::string commit = p["qkv"]["commit"];
  CHECK((commit == "unknown" || std::regex_match(commit, std::regex("[0-9a-f]{40}"))));
  CHECK(!p["compiler"].get<std::string>().empty());
  CHECK(p["blas"]["library"] == "openblas");
  CHECK(!p["blas"]["core"].get<std::string>().empty());
  CHECK(p["blas"]["config"].get<std::string>().find("OpenBLAS") != std::string::npos);
  CHECK(p["onednn"]["built"] == true);
  CHECK(p["onednn"]["version"].get<std::string>().rfind("2.", 0) == 0);
  CHECK(!p["onednn"]["isa"].get<std::string>().empty());
  CHECK(p["onednn"]["bf16"].is_boolean());
  const std::string setting = p["attention"]["setting"];
  CHECK((setting == "auto" || setting == "tiles" || setting == "onednn"));
  for (const char* length : {"short", "long"}) {
    const std::string kernel = p["attention"][length];
    CHECK((kernel.rfind("tiles (", 0) == 0 || kernel.rfind("onednn (", 0) == 0));
  }
  CHECK(!p["cpu"]["model"].get<std::string>().empty());
  CHECK(p["cpu"]["features"].size() > 5);
  CHECK(p["kernels"].get<std::string>().rfind("OpenBLAS ", 0) == 0);
  CHECK(p["kernels"].get<std::string>().find(", oneDNN " + p["onednn"]["isa"].get<std::string>()) !=
        std::string::npos);
  // threads = 0 saved as the count it became, in both files
  const int threads = p["threads"];
  CHECK(threads >= 1);
  CHECK(read_file(run + "/config.toml").find("threads = " + std::to_string(threads) + "\n") !=
        std::string::npos);
  // the same kernels: no note; others: one line, on stderr for eval (its --json stays JSON)
  const RunResult same = ok("eval " + quoted(run) + " --json");
  CHECK(same.output.find("kernels") == std::string::npos);
  json changed = p;
  changed["kernels"] = "OpenBLAS Prescott";
  { std::ofstream(run + "/provenance.json") << changed.dump(2); }
  const RunResult ev = ok("eval " + quoted(run));
  CHECK(ev.output.find("was trained on OpenBLAS Prescott kernels; this eval runs on " +
                       p["kernels"].get<std::string>()) != std::string::npos);
  // --json: the note is a line of its own (stderr), the JSON object the other
  const RunResult js = ok("eval " + quoted(run) + " --json");
  const size_t brace = js.output.find("\n{");
  REQUIRE(brace != std::string::npos);
  CHECK(js.output.substr(0, brace).find("qkv: note: ") == 0);
  CHECK(json::parse(js.output.substr(brace + 1)).contains("loss"));
  const RunResult res = ok("train --resume " + quoted(run) + " --quiet");
  CHECK(res.output.find("was trained on OpenBLAS Prescott kernels; this resume runs on") !=
        std::string::npos);
}
