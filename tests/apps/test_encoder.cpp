// The encoder-only family through the real binary: a tiny trained run per task (dyck, parity,
// majority; under a second each) through train, eval, classify (arguments, stdin, --json),
// attention, lens, patch, heads and the training probe; what a classifier cannot do is refused with
// what it can, and what a translator cannot do (classify) likewise.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kTasks[] = {"dyck", "parity", "majority"};

// The shipped config of each task, shrunk: d 32, 2 layers, 150 steps on 2,000 examples.
const TempDir& encoder_runs() {
  static TempDir dir("encoder");
  static const bool trained = [&] {
    for (const char* t : kTasks) {
      const RunResult r = run_qkv(
          "train " + shipped_config(std::string(t) + ".toml") + " --run-dir '" + dir.file(t) +
          "' --threads 1 --quiet --train.max_steps 150 --train.epochs 0 --train.eval_every 50"
          " --data.train_size 2000 --data.valid_size 100 --data.test_size 100 --data.max_len 12"
          " --model.d_model 32 --model.d_ff 64 --model.encoder_layers 2 --optim.warmup 10"
          " --optim.lr 3e-3");
      INFO(t << ": " << r.output);
      REQUIRE(r.status == 0);
    }
    return true;
  }();
  (void)trained;
  return dir;
}

std::string run_of(const char* task) { return encoder_runs().file(task); }

std::vector<json> records(const std::string& run) {
  std::vector<json> out;
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

json last_record(const std::string& run, const std::string& split) {
  json found;
  for (const json& j : records(run))
    if (j.value("split", "") == split) found = j;
  return found;
}

}  // namespace

TEST_CASE(
    "encoder: each task trains, its validation and test records holding accuracy, loss and counts",
    "[e2e]") {
  for (const char* t : kTasks) {
    INFO(t);
    int valid = 0;
    for (const json& j : records(run_of(t))) {
      const std::string split = j.value("split", "");
      if (split != "valid" && split != "test") continue;
      valid += split == "valid";
      int64_t examples = 0, correct = 0, predicted = 0;
      REQUIRE(j["classes"].size() == 2);
      for (const auto& [name, k] : j["classes"].items()) {
        examples += k["examples"].get<int64_t>();
        correct += k["correct"].get<int64_t>();
        predicted += k["predicted"].get<int64_t>();
        CHECK(k["correct"] <= k["examples"]);
      }
      CHECK(examples == j["examples"].get<int64_t>());
      CHECK(predicted == examples);
      CHECK(j["accuracy"].get<double>() == Approx(double(correct) / double(examples)));
      CHECK(std::isfinite(j["loss"].get<double>()));
    }
    CHECK(valid == 3);  // steps 50, 100, 150
    CHECK(last_record(run_of(t), "test")["examples"] == 100);
  }
  // what the tiny runs learn: majority all but solved, dyck well above chance
  CHECK(last_record(run_of("majority"), "test")["accuracy"].get<double>() >= 0.9);
  CHECK(last_record(run_of("dyck"), "test")["accuracy"].get<double>() >= 0.7);
}

TEST_CASE("encoder: eval scores a split as training's test record, and --max-len regenerates it",
          "[e2e]") {
  for (const char* t : kTasks) {
    INFO(t);
    const RunResult r = run_qkv("eval '" + run_of(t) + "' --split test --json");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const json j = json::parse(r.output);
    const json test = last_record(run_of(t), "test");
    CHECK(j["examples"] == 100);
    CHECK(j["accuracy"].get<double>() == test["accuracy"].get<double>());
    CHECK(j["classes"] == test["classes"]);  // the per-class counts, as training's record
    CHECK(j["loss"].get<double>() == Approx(test["loss"].get<double>()).epsilon(1e-9));
  }
  const RunResult longer = run_qkv("eval '" + run_of("majority") + "' --max-len 20");
  INFO(longer.output);
  REQUIRE(longer.status == 0);
  CHECK_THAT(longer.output, Catch::Contains("lengths 1..20"));
  // past this machine's memory: refused with the estimate, as a translator's is
  const RunResult huge = run_qkv("eval '" + run_of("majority") + "' --max-len 100000");
  INFO(huge.output);
  CHECK(huge.status != 0);
  CHECK_THAT(huge.output,
             Catch::Contains("eval --max-len: regenerating") && Catch::Contains("more than the"));
  const RunResult beam = run_qkv("eval '" + run_of("dyck") + "' --beam 4");
  CHECK(beam.status == 1);
  CHECK_THAT(beam.output, Catch::Contains("not data.task = dyck"));
}

TEST_CASE("encoder: classify from arguments, stdin and --json agree", "[e2e]") {
  const std::string run = run_of("majority");
  const RunResult text = run_qkv("classify '" + run + "' '1 1 0 1 1' 00010 ' 0 1 0'");
  INFO(text.output);
  REQUIRE(text.status == 0);
  std::istringstream lines(text.output);
  std::string line;
  std::vector<std::string> predicted;
  while (std::getline(lines, line)) {
    predicted.push_back(line.substr(0, line.find('\t')));
    double sum = 0;  // "1<TAB>0 0.0012<TAB>1 0.9988"
    std::istringstream fields(line.substr(line.find('\t') + 1));
    std::string name;
    double p = 0;
    while (fields >> name >> p) sum += p;
    CHECK(sum == Approx(1).margin(2e-4));
  }
  CHECK(predicted == std::vector<std::string>{"1", "0", "0"});  // the majority bit, learned
  TempDir in("encoder_stdin");
  {
    std::ofstream f(in.file("lines.txt"));
    f << "11011\n\n00010\n";
  }
  const RunResult piped = run_qkv("classify '" + run + "' --json < '" + in.file("lines.txt") + "'");
  INFO(piped.output);
  REQUIRE(piped.status == 0);
  std::istringstream js(piped.output);
  std::vector<std::string> got;
  while (std::getline(js, line)) {
    if (line.empty()) {
      got.push_back("");  // a blank input line gives a blank output line
      continue;
    }
    const json j = json::parse(line);
    got.push_back(j["predicted"]);
    CHECK(j["tokens"][0] == "<cls>");
    double sum = 0;
    for (const json& c : j["classes"]) sum += c["p"].get<double>();
    CHECK(sum == Approx(1));
  }
  CHECK(got == std::vector<std::string>{"1", "", "0"});
  for (const auto& [input, says] : {std::pair{"'1 x 0'", "'x' is not a symbol of majority"},
                                    std::pair{"'   '", "the input has no symbols"},
                                    std::pair{"'<cls>'", "'<' is not a symbol"}}) {
    const RunResult bad = run_qkv("classify '" + run + "' " + input);
    CHECK(bad.status == 1);
    CHECK_THAT(bad.output, Catch::StartsWith("qkv: classify: ") && Catch::Contains(says));
  }
}

TEST_CASE("encoder: a classifier refuses translate and generate, and a translator refuses classify",
          "[e2e]") {
  const std::string run = run_of("dyck");
  const RunResult tr = run_qkv("translate '" + run + "' '( )'");
  CHECK(tr.status == 1);
  CHECK_THAT(tr.output, Catch::Contains("cannot translate (model.kind = \"encoder\"): use qkv "
                                        "classify"));
  const RunResult gen = run_qkv("generate '" + run + "' --prompt '('");
  CHECK(gen.status == 1);
  CHECK_THAT(gen.output, Catch::Contains("cannot generate") && Catch::Contains("qkv classify"));
  TempDir dir("encoder_copy");
  const RunResult copy =
      run_qkv("train " + shipped_config("copy.toml") + " --run-dir '" + dir.file("copy") +
              "' --threads 1 --quiet --train.max_steps 5 --train.epochs 0 --data.train_size 50"
              " --data.valid_size 5 --data.test_size 5 --optim.warmup 1 --model.d_model 16 "
              "--model.d_ff 16");
  REQUIRE(copy.status == 0);
  const RunResult cl = run_qkv("classify '" + dir.file("copy") + "' '1 2'");
  CHECK(cl.status == 1);
  CHECK_THAT(cl.output, Catch::Contains("cannot classify (model.kind = \"encoder_decoder\"): use "
                                        "qkv translate"));
}

TEST_CASE("encoder: attention, lens and patch read a classifier", "[e2e]") {
  TempDir out("encoder_out");
  const std::string run = run_of("dyck");
  const RunResult grid =
      run_qkv("attention '" + run + "' '( [ ] )' --layer all --head all --out '" +
              out.file("grid.png") + "'");
  INFO(grid.output);
  REQUIRE(grid.status == 0);
  CHECK_THAT(grid.output, Catch::StartsWith("class: ") && Catch::Contains("2 rows"));
  CHECK(fs::file_size(out.file("grid.png")) > 1000);
  const RunResult one =
      run_qkv("attention '" + run + "' '([])' --out '" + out.file("one.svg") + "'");
  REQUIRE(one.status == 0);
  CHECK_THAT(one.output, Catch::Contains(": self-attention, layer 2/2") &&
                             Catch::Contains("5 x 5"));  // <cls> and four brackets
  const RunResult lens = run_qkv("lens '" + run + "' '([])' --json");
  INFO(lens.output);
  REQUIRE(lens.status == 0);
  const json l = json::parse(lens.output);
  CHECK(l["layers"].size() == 3);  // the embeddings and two blocks, read at the pooled position
  const RunResult patch = run_qkv("patch '" + run_of("majority") +
                                  "' --clean '1 1 1 0 1' --corrupt '0 0 1 0 0' --json");
  INFO(patch.output);
  REQUIRE(patch.status == 0);
  CHECK(json::parse(patch.output).contains("heads"));
}

TEST_CASE("encoder: qkv heads scores a classifier's heads, and the probe records during training",
          "[e2e]") {
  // heads: every head of its one attention site, named L.H as a one-site model's are, with a
  // loss change under ablation for each (the read-out is the pooled position's class logits)
  const RunResult h = run_qkv("heads '" + run_of("dyck") + "' --batches 1 --json --threads 1");
  INFO(h.output);
  REQUIRE(h.status == 0);
  const json j = json::parse(h.output);
  REQUIRE(j["heads"].size() % 2 == 0);  // two layers of equal heads
  const int64_t per_layer = static_cast<int64_t>(j["heads"].size()) / 2;
  for (size_t i = 0; i < j["heads"].size(); ++i) {
    const json& row = j["heads"][i];
    CHECK(row["attention"] == "self");
    CHECK(row["head"] == std::to_string(i / per_layer) + "." + std::to_string(i % per_layer));
    CHECK(std::isfinite(row["zero_loss_change"].get<double>()));
  }
  // [probe] during training: the pattern scores of the site, keyed by its name
  static TempDir dir("encoder_probe");
  const RunResult t =
      run_qkv("train " + shipped_config("dyck.toml") + " --run-dir '" + dir.file("run") +
              "' --threads 1 --quiet --train.max_steps 40 --train.epochs 0 --train.eval_every 20"
              " --data.train_size 500 --data.valid_size 50 --data.test_size 50 --data.max_len 12"
              " --model.d_model 32 --model.d_ff 64 --model.encoder_layers 2 --optim.warmup 5"
              " --probe.every 20");
  INFO(t.output);
  REQUIRE(t.status == 0);
  int probes = 0;
  for (const json& r : records(dir.file("run")))
    if (r.contains("probe")) {
      ++probes;
      CHECK(r["probe"]["attentions"].contains("self"));
    }
  CHECK(probes == 3);  // steps 0 (before training), 20 and 40
}
