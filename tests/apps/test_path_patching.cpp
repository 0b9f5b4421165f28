// qkv patch --path (inspect/path_patching.hpp) on tiny trained pre-LN runs of each family: the
// identities (every direct path at once is activation patching of the sender, no path is the
// corrupted run, one path composed alone is that path's table value), the paths each family's
// structure gives, one path's values against torch on the tiny GPT's weights, and the command's
// output and errors through the binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "inspect/heads.hpp"
#include "inspect/patch.hpp"
#include "inspect/path_patching.hpp"
#include "nn/model.hpp"
#include "nn/safetensors.hpp"
#include "run/inference.hpp"
#include "support/inspect_runs.hpp"
#include "support/nn.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::testing;
using nlohmann::json;

namespace {

// The tiny GPT ("lm", pre-LN), the copy translator trained post-LN ("copy") and pre-LN
// ("copy_pre"), and a tiny majority classifier ("majority", pre-LN).
const TempDir& runs() {
  return inspect_runs("path_patching", [](const TempDir& dir) {
    train_tiny_copy(dir, "copy_pre", 40, 200, " --model.norm_first true");
  });
}

std::unique_ptr<run::Inference> open(const std::string& name) { return open_tiny(runs(), name); }

std::vector<std::pair<std::string, std::string>> candidates(const std::string& run) {
  if (run == "lm")
    return {{"First Citizen", "KING HENRY: M"},
            {"ROMEO: O, she", "JULIET: Ay me"},
            {"What, ho! Boy", "Nay, my lord."}};
  if (run == "copy_pre" || run == "copy")
    return {{"5 6 7 8", "1 2 3 4"}, {"1 2 3 4 5", "7 2 3 4 5"}, {"8 8 2", "8 8 6"}, {"5 6", "1 2"}};
  return {{"0110111", "0000100"}, {"1111111", "0000000"}, {"0111", "0001"}, {"1100", "0011"}};
}

// The first candidate pair whose answers differ.
std::pair<data::Ids, data::Ids> differing(const run::Inference& inf, const std::string& run) {
  std::pair<data::Ids, data::Ids> p = first_differing(inf, candidates(run));
  if (p.first.empty()) FAIL("no pair of inputs of " << run << " with different answers");
  return p;
}

}  // namespace

TEST_CASE("path patching: every path at once is activation patching, no path changes nothing") {
  for (const char* name : {"lm", "copy_pre", "majority"}) {
    INFO(name);
    const auto inf = open(name);
    const auto [clean, corrupt] = differing(*inf, name);
    const inspect::PatchRuns runs(*inf, clean, corrupt);
    double moved = 0;
    for (const inspect::Attention& site : inspect::attentions_of(*inf))
      for (int64_t l = 0; l < site.layers; ++l)
        for (int64_t h = 0; h < site.heads; ++h) {
          const inspect::HeadRef sender{site, l, h};
          INFO("sender " << sender.name());
          const inspect::PathRuns paths(*inf, runs, inspect::direct_paths(*inf, sender, "test"));
          const size_t n = paths.paths().receivers.size();
          std::vector<size_t> every(n);
          for (size_t i = 0; i < n; ++i) every[i] = i;
          const double activation = runs.head(site, l, h);
          moved += std::abs(activation);
          CHECK(paths.restored(every) == Approx(activation).margin(1e-4));
          CHECK(paths.restored({}) == 0.0);  // the corrupted run, bit for bit
          // one path composed alone is that path's value in the table
          const std::vector<double> each = paths.each();
          for (const size_t i : {size_t{0}, n - 1}) CHECK(paths.restored({i}) == each[i]);
        }
    CHECK(moved > 0.1);  // some sender restores something: the identity is not of zeros
  }
}

TEST_CASE("path patching: the direct paths each family's structure gives") {
  const auto names = [](const inspect::Paths& p) {
    std::set<std::string> s;
    for (const auto& r : p.receivers) s.insert(r.name + ":" + r.input);
    return s;
  };
  {
    const auto inf = open("copy_pre");
    const auto senders = inspect::path_senders(*inf, "encoder.L0H1,decoder.1.0", "test");
    REQUIRE(senders.size() == 2);
    // an encoder head: the next encoder layer's heads, the encoder's MLPs, and cross-attention's
    // keys and values in every decoder layer; no logits, no cross queries
    const std::set<std::string> enc = names(inspect::direct_paths(*inf, senders[0], "test"));
    CHECK(enc.count("encoder.1.0:q"));
    CHECK(enc.count("mlp.0:mlp"));
    CHECK(enc.count("cross.0.1:k"));
    CHECK(enc.count("cross.1.0:v"));
    CHECK_FALSE(enc.count("cross.0.0:q"));
    CHECK_FALSE(enc.count("logits:logits"));
    CHECK(enc.size() == 3 * 2 + 2 + 2 * 2 * 2);
    // a decoder head of the last layer: cross-attention's queries of its layer, its MLP, logits
    const std::set<std::string> dec = names(inspect::direct_paths(*inf, senders[1], "test"));
    CHECK(dec == std::set<std::string>{"cross.1.0:q", "cross.1.1:q", "mlp.1:mlp", "logits:logits"});
  }
  const auto inf = open("lm");
  const std::set<std::string> last =
      names(inspect::direct_paths(*inf, inspect::path_senders(*inf, "1.3", "test")[0], "test"));
  CHECK(last == std::set<std::string>{"mlp.1:mlp", "logits:logits"});
}

TEST_CASE("path patching: the command's table and JSON, and one line for each bad request") {
  const std::string lm = quoted(runs().file("lm"));
  const std::string io = " --clean 'First Citizen' --corrupt 'KING HENRY: M' --threads 1";
  const RunResult t = run_qkv("patch " + lm + io + " --path L0H1");
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK(t.output.find("sender 0.1 (causal self-attention, layer 0 head 1)") != std::string::npos);
  CHECK(t.output.find("top paths:") != std::string::npos);
  CHECK(t.output.find("  1.2 ") != std::string::npos);
  const RunResult j = run_qkv("patch " + lm + io + " --path 0.1,1.0 --json");
  INFO(j.output);
  REQUIRE(j.status == 0);
  const json r = json::parse(j.output);
  CHECK(r["method"] == "path patching");
  REQUIRE(r["senders"].size() == 2);
  CHECK(r["senders"][0]["sender"] == "0.1");
  CHECK(r["senders"][0]["paths"].size() == 1 + 4 * 3 + 1 + 1);
  CHECK(r["senders"][1]["paths"].back()["receiver"] == "logits");
  // the activation column is qkv patch's value for the head
  const json e = json::parse(run_qkv("patch " + lm + io + " --json").output);
  for (const json& h : e["heads"])
    if (h["head"] == "0.1") CHECK(h["restored"] == r["senders"][0]["activation"]);
  const std::string copy = quoted(runs().file("copy"));
  const std::string cio = " --clean '1 2 3 4 5' --corrupt '7 2 3 4 5'";
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {lm + io + " --path 2.0", "nearest"},
           {lm + io + " --path cross.0.0", "this model's heads are 0.0 .. 1.3"},
           {lm + io + " --path ''", "--path needs a sender head (e.g. 0.0)"},
           {lm + io + " --path 0.0 --approx", "--path and --approx are two methods"},
           {lm + io + " --path 0.0 --out x", "--out draws activation patching's heatmaps"},
           {lm + io + " --path 0.0 --max-work 100", "more than the bound of 100 (--max-work"},
           {copy + cio + " --path encoder.0.0", "--path needs a pre-LN model"}}) {
    const RunResult b = run_qkv("patch " + args);
    INFO(args << ": " << b.output);
    CHECK(b.status == 1);
    CHECK(b.output.find(says) != std::string::npos);
    CHECK(std::count(b.output.begin(), b.output.end(), '\n') == 1);
  }
}

TEST_CASE("reference: path patching's values match torch on the tiny GPT", "[reference]") {
  TempDir dir("path_patching_reference");
  const auto inf = open("lm");
  const data::Ids clean = inf->encode("First Citizen", "test"),
                  corrupt = inf->encode("KING HENRY: M", "test");
  const inspect::PatchRuns runs(*inf, clean, corrupt);
  const inspect::HeadRef sender = inspect::path_senders(*inf, "0.1", "test")[0];
  const inspect::PathRuns paths(*inf, runs, inspect::direct_paths(*inf, sender, "test"));
  const std::vector<double> ours = paths.each();
  json cfg = gpt_reference_config(*inf);
  cfg.update({{"a", runs.clean_id()},
              {"b", runs.corrupt_id()},
              {"sender_layer", sender.layer},
              {"sender_head", sender.head}});
  save_reference_case(
      dir.file("lm.in.safetensors"), *inf,
      {{"input.clean", run::row_of(clean)}, {"input.corrupt", run::row_of(corrupt)}}, cfg);
  SKIP_WITHOUT_TORCH();
  const ReferenceRun ref =
      run_reference(source_dir() + "/tests/apps/reference_path_patching.py", dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  const nn::SafetensorsFile theirs = nn::load_safetensors(dir.file("lm.out.safetensors"));
  const std::vector<double> diff = to_vector<double>(theirs.get("diff").to(DType::f64));
  CHECK(runs.clean_diff == Approx(diff[0]).margin(1e-4));
  CHECK(runs.corrupt_diff == Approx(diff[1]).margin(1e-4));
  const std::vector<double> want = to_vector<double>(theirs.get("paths").to(DType::f64));
  REQUIRE(ours.size() == want.size());
  double top = 0, worst = 0;
  for (const double v : want) top = std::max(top, std::abs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("path " << i << ": " << paths.paths().receivers[i].name << " "
                 << paths.paths().receivers[i].input);
    worst = std::max(worst, std::abs(ours[i] - want[i]));
    CHECK(ours[i] == Approx(want[i]).margin(1e-4 * std::max(top, 1.0)));
  }
  CHECK(top > 1e-3);  // the paths restore something: the comparison is not of zeros
  std::printf("path patching reference: max|torch| %.4g, worst error %.3g\n", top, worst);
}
