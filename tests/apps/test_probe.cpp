// [probe] through the qkv binary (inspect/probe_hook.hpp): tiny runs of both model kinds with
// the probe and without it. The probe's records come at step 0, every N and the last step in
// the documented shape; its last scores are `qkv heads`'s on the final checkpoint (the same
// code, on the same weights: equal bits); the runs with and without it log the same training
// and validation records and write the same weights (a language model in bf16 too, where it
// runs); bad [probe] settings are one-line errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/precision.hpp"
#include "inspect/head_table.hpp"
#include "run/inference.hpp"
#include "run/run.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A character GPT (2 layers, 2 heads, dropout on: the probe must not draw from its generator)
// and a copy-task encoder-decoder (1 + 1 layers, 2 heads).
const std::string kLm =
    " --threads 1 --model.d_model 16 --model.d_ff 32 --model.heads 2 --model.decoder_layers 2"
    " --model.dropout 0.1 --data.block_size 16 --model.max_len 16 --data.batch_size 8"
    " --train.max_steps 12 --train.log_every 2 --train.eval_every 6 --train.eval_iters 2"
    " --optim.warmup 2";
const std::string kCopy =
    " --threads 1 --model.d_model 16 --model.d_ff 32 --model.heads 2 --model.encoder_layers 1"
    " --model.decoder_layers 1 --model.dropout 0.1 --data.train_size 64 --data.valid_size 8"
    " --data.test_size 8 --data.batch_size 16 --train.max_steps 8 --train.log_every 2"
    " --train.eval_every 4 --train.eval_examples 8 --optim.warmup 2";
const std::string kProbe = " --probe.every 5 --probe.sequences 2 --probe.seed 7";

struct Kind {
  std::string name, config, args;
  int64_t steps;
  bool lm;
};
// The language model in bf16 too where this machine runs it (the probe's scope nests in the
// run's precision, whose weight copies are made per scope).
const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = [] {
    std::vector<Kind> out{{"lm", "shakespeare-char.toml", kLm, 12, true},
                          {"copy", "copy.toml", kCopy, 8, false}};
    if (bf16_unsupported_reason().empty())
      out.push_back({"lm-bf16", "shakespeare-char.toml", kLm + " --precision bf16", 12, true});
    return out;
  }();
  return k;
}

// Each kind trained twice: with the probe (NAME-probe) and without (NAME-plain).
const TempDir& runs() {
  static TempDir dir("probe");
  static const bool trained = [] {
    for (const Kind& k : kinds())
      for (const bool probe : {true, false}) {
        const std::string out = dir.file(k.name + (probe ? "-probe" : "-plain"));
        const RunResult r = run_qkv("train " + shipped_config(k.config) + " --run-dir '" + out +
                                    "'" + k.args + (probe ? kProbe : ""));
        INFO(r.output);
        REQUIRE(r.status == 0);
        if (probe) CHECK(r.output.find("probe: ") != std::string::npos);  // the cost line
      }
    return true;
  }();
  (void)trained;
  return dir;
}

std::vector<json> records(const std::string& run) {
  std::vector<json> out;
  std::istringstream in(read_file(runs().file(run) + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::vector<json> probes(const std::string& run) {
  std::vector<json> out;
  for (const json& j : records(run))
    if (j.contains("probe")) out.push_back(j);
  return out;
}

}  // namespace

TEST_CASE("probe: records at step 0, every N steps and the last, in the documented shape") {
  for (const Kind& k : kinds()) {
    INFO(k.name);
    const std::vector<json> p = probes(k.name + "-probe");
    std::vector<int64_t> steps;
    for (const json& j : p) steps.push_back(j["step"].get<int64_t>());
    const std::vector<int64_t> want =
        k.lm ? std::vector<int64_t>{0, 5, 10, 12} : std::vector<int64_t>{0, 5, 8};
    CHECK(steps == want);
    CHECK(probes(k.name + "-plain").empty());
    for (const json& j : p) {
      const json& pr = j["probe"];
      CHECK(pr["seconds"].get<double>() > 0);
      const json& atts = pr["attentions"];
      const std::vector<std::pair<std::string, std::vector<std::string>>> shape =
          k.lm ? decltype(shape){{"self",
                                  {"entropy", "previous_token", "duplicate_token", "induction"}}}
               : decltype(shape){
                     {"encoder", {"entropy", "previous_token", "duplicate_token", "induction"}},
                     {"decoder", {"entropy", "previous_token", "duplicate_token", "induction"}},
                     {"cross", {"entropy", "alignment"}}};
      CHECK(atts.size() == shape.size());
      // the sites in the model's order (the attentions' keys are sorted), with the model's titles
      std::vector<std::string> order, titles;
      for (const json& s : pr["sites"]) {
        order.push_back(s["name"]);
        titles.push_back(s["title"]);
      }
      CHECK(order == (k.lm ? std::vector<std::string>{"self"}
                           : std::vector<std::string>{"encoder", "decoder", "cross"}));
      CHECK(titles ==
            (k.lm ? std::vector<std::string>{"causal self-attention"}
                  : std::vector<std::string>{"encoder self-attention", "decoder self-attention",
                                             "cross-attention"}));
      for (const auto& [att, scores] : shape) {
        INFO(att);
        REQUIRE(atts.contains(att));
        const json& a = atts[att];
        const int64_t layers = k.lm ? 2 : 1;
        CHECK(a["layers"] == layers);
        CHECK(a["heads"] == 2);
        CHECK(a.size() == scores.size() + 2);  // layers, heads and the scores, nothing else
        for (const std::string& s : scores) {
          REQUIRE(a[s].size() == static_cast<size_t>(layers));
          for (const json& row : a[s]) CHECK(row.size() == 2);
        }
      }
      CHECK(pr.contains("icl") == k.lm);
      if (k.lm) CHECK(std::isfinite(pr["icl"].get<double>()));
    }
  }
}

TEST_CASE("probe: the last probe's scores are qkv heads's on the final checkpoint, bit for bit") {
  for (const Kind& k : kinds()) {
    INFO(k.name);
    const json last = probes(k.name + "-probe").back();
    REQUIRE(last["step"] == k.steps);
    const auto inf = run::open_inference(runs().file(k.name + "-probe"), {.checkpoint = "latest",
                                                                          .precision = std::nullopt,
                                                                          .threads = 1,
                                                                          .op = "test",
                                                                          .max_input = 1024});
    const inspect::HeadTable t = inspect::head_table(
        *inf, {.split = "valid", .max_batches = 1, .probes = 2, .probe_length = 0, .seed = 7});
    REQUIRE(!t.rows.empty());
    for (const inspect::HeadRow& row : t.rows) {
      INFO(row.attention << " " << row.name);
      const json& a = last["probe"]["attentions"][row.attention];
      for (const auto& [score, value] : row.scores)
        CHECK(a[score][row.layer][row.head].get<double>() == value);
    }
  }
}

TEST_CASE("probe: a run with the probe logs and saves what the run without it does") {
  for (const Kind& k : kinds()) {
    INFO(k.name);
    std::vector<json> with, without = records(k.name + "-plain");
    for (const json& j : records(k.name + "-probe"))
      if (!j.contains("probe")) with.push_back(j);
    REQUIRE(with.size() == without.size());
    for (size_t i = 0; i < with.size(); ++i) {
      json a = with[i], b = without[i];
      for (json* j : {&a, &b})  // wall-clock times differ between any two runs
        for (const char* key : {"seconds", "decode_seconds", "tokens_per_second"}) j->erase(key);
      CHECK(a.dump() == b.dump());
    }
    const std::vector<std::string> ckpts = run::step_checkpoints(runs().file(k.name + "-probe"));
    REQUIRE(!ckpts.empty());
    CHECK(ckpts == run::step_checkpoints(runs().file(k.name + "-plain")));
    for (const std::string& c : ckpts)
      for (const char* file : {"model.safetensors", "optim.safetensors"}) {
        INFO(c << "/" << file);
        const std::string p = runs().file(k.name + "-probe") + "/checkpoints/" + c + "/" + file;
        const std::string q = runs().file(k.name + "-plain") + "/checkpoints/" + c + "/" + file;
        CHECK(read_file(p) == read_file(q));
      }
  }
}

TEST_CASE("probe: bad settings are one-line errors naming the key") {
  TempDir dir("probe-errors");
  struct Bad {
    std::string args, says;
  };
  const std::string lm = "train " + shipped_config("shakespeare-char.toml") + " --dry-run";
  const std::string copy = "train " + shipped_config("copy.toml") + " --dry-run";
  for (const Bad& b : std::vector<Bad>{
           {lm + " --probe.every -1", "probe.every: must be >= 0 (0: off), got -1"},
           {lm + " --probe.sequences 0", "probe.sequences: must be in 1..1000, got 0"},
           {lm + " --probe.sequences 300000", "probe.sequences: must be in 1..1000, got 300000"},
           {copy + " --probe.length 100000", "probe.length: must be in 0..512 (0: automatic)"},
           {lm + " --probe.every 5 --probe.length 33",
            "probe.length: the probe's 2 x 33 = 66 tokens are more than the model's context of 64 "
            "(data.block_size); at most 32"},
           {copy + " --model.position learned --model.max_len 20 --probe.length 5",
            "probe.length: the probe's 2 x 5 = 10 source tokens decode to up to 21 decoder "
            "positions"},
           {lm + " --probe.evry 5", "probe.evry: unknown key; did you mean probe.every?"},
           {lm + " --probe.icl_windows 0", "probe.icl_windows: must be in 1..1000, got 0"},
           {lm + " --probe.icl_windows 1000000000",
            "probe.icl_windows: must be in 1..1000, got 1000000000"}}) {
    INFO(b.args);
    const RunResult r = run_qkv(b.args + " --run-dir '" + dir.file("run") + "'");
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(r.output.find(b.says) != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  // From a file: the error names the file and the key's line.
  const std::string cfg = dir.file("bad.toml");
  {
    std::ofstream(cfg) << read_file(source_path("configs/shakespeare-char.toml"))
                       << "\n[probe]\nevery = -5\n";
  }
  const RunResult r = run_qkv("train '" + cfg + "' --dry-run --run-dir '" + dir.file("run") + "'");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("bad.toml:") != std::string::npos);
  CHECK(r.output.find("probe.every: must be >= 0") != std::string::npos);
}
