// Looking inside trained runs (inspect/, qkv heads, lens, patch, --ablate): tiny runs of both
// model kinds, trained through the binary in seconds, then the tools in process and through
// the binary, in fp32 and bf16.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include "inspect/attribution.hpp"
#include "inspect/head_table.hpp"
#include "inspect/heads.hpp"
#include "inspect/lens.hpp"
#include "inspect/patch.hpp"
#include "interp/head_scores.hpp"
#include "run/inference.hpp"
#include "serve/model.hpp"
#include "support/process.hpp"
#include "support/tensors.hpp"
#include "support/tiny_runs.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

// The tiny GPT and copy runs (tests/support/tiny_runs.hpp).
const TempDir& runs() { return tiny_runs("inspect", 60); }

struct Case {
  std::string run, clean, corrupt, precision;
};
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* p : {"fp32", "bf16"}) {
    out.push_back({"lm", "First Citizen", "First Citizan", p});
    out.push_back({"copy", "1 2 3 4 5", "1 2 3 4 7", p});
  }
  return out;
}

std::unique_ptr<run::Inference> open(const Case& c) {
  return run::open_inference(
      runs().file(c.run),
      {.precision = qkv::parse_precision(c.precision), .threads = 1, .op = "test"});
}

}  // namespace

TEST_CASE("inspect: the logit lens at the last layer is the model's own logits") {
  for (const Case& c : cases()) {
    INFO(c.run << " " << c.precision);
    const auto inf = open(c);
    const inspect::Lens lens = inspect::logit_lens(*inf, inf->encode(c.clean, "test"), 3);
    REQUIRE(lens.layers.size() == 3);  // the embedding and two blocks
    CHECK(lens.layers.front().name == "embed");
    CHECK(same_bits(lens.layers.back().logits, lens.logits));
    CHECK(lens.layers.back().rank == 0);
    CHECK_FALSE(same_bits(lens.layers.front().logits, lens.logits));
  }
}

TEST_CASE("inspect: the lens reads a chosen position of a translator's output") {
  const auto inf = open({"copy", "", "", "fp32"});
  const data::Ids input = inf->encode("1 2 3 4 5", "test");
  const data::Ids tgt_in = inf->inspect(input).tgt_in;
  const auto T = static_cast<int64_t>(tgt_in.size());
  REQUIRE(T >= 2);
  CHECK(inspect::logit_lens(*inf, input, 3).index == T - 1);  // the last, by default
  for (int64_t p = 0; p < T; ++p) {
    INFO("position " << p);
    const inspect::Lens lens = inspect::logit_lens(*inf, input, 3, p);
    CHECK(lens.index == p);
    CHECK(lens.position == inf->output_labels({tgt_in[static_cast<size_t>(p)]})[0]);
    // the model's own prediction at p, and the last layer's lens agrees with it
    const int64_t own = to_vector<int64_t>(argmax(lens.logits.select(0, p), -1))[0];
    CHECK(lens.prediction_id == own);
    CHECK(lens.layers.back().rank == 0);
    CHECK(same_bits(lens.layers.back().logits, lens.logits));
  }
  CHECK_THROWS_WITH(inspect::logit_lens(*inf, input, 3, T),
                    Catch::Contains("lens: --position " + std::to_string(T) + " is past the"));
  const std::string run = "lens '" + runs().file("copy") + "' '1 2 3 4 5' --threads 1";
  const RunResult first = run_qkv(run + " --position 0 --json");
  INFO(first.output);
  REQUIRE(first.status == 0);
  CHECK(nlohmann::json::parse(first.output)["index"] == 0);
  CHECK(nlohmann::json::parse(first.output)["position"] == "<bos>");
  for (const std::string bad : {" --position 99", " --position 0 --target 3"}) {
    const RunResult r = run_qkv(run + bad);
    INFO(bad << ": " << r.output);
    CHECK(r.status == 1);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
}

TEST_CASE("inspect: patching a whole layer's residual restores the clean logits at every layer") {
  for (const Case& c : cases()) {
    INFO(c.run << " " << c.precision);
    const auto inf = open(c);
    const data::Ids clean = inf->encode(c.clean, "test"), corrupt = inf->encode(c.corrupt, "test");
    const data::Ids tgt_in = inf->inspect(clean).tgt_in;
    const auto atts = inspect::attentions_of(*inf);
    const inspect::Attention& in = atts.front();
    nn::Hooks cap;
    cap.capture = nn::names_matching({"*.resid_pre"});
    const Tensor clean_logits = inf->logits(clean, tgt_in, &cap);
    const Tensor corrupt_logits = inf->logits(corrupt, tgt_in);
    REQUIRE_FALSE(same_bits(clean_logits, corrupt_logits));
    std::vector<int64_t> every(clean.size());
    for (size_t p = 0; p < every.size(); ++p) every[p] = static_cast<int64_t>(p);
    for (int64_t l = 0; l < in.layers; ++l) {
      const std::string point = in.prefix + std::to_string(l) + ".resid_pre";
      nn::Hooks into_corrupt, into_clean;
      inspect::add_residual_patch(into_corrupt, point, cap.cache.at(point), every);
      inspect::add_residual_patch(into_clean, point, cap.cache.at(point), {0});
      CHECK(same_bits(inf->logits(corrupt, tgt_in, &into_corrupt), clean_logits));
      CHECK(same_bits(inf->logits(clean, tgt_in, &into_clean), clean_logits));  // clean into clean
    }
    // The metric: 1 where the clean logits are back, 0 unpatched.
    const int64_t a = 1, b = 2;
    const double d_clean = inspect::logit_difference(clean_logits, a, b),
                 d_corrupt = inspect::logit_difference(corrupt_logits, a, b);
    CHECK((d_clean - d_corrupt) / (d_clean - d_corrupt) == 1.0);
    CHECK((d_corrupt - d_corrupt) / (d_clean - d_corrupt) == 0.0);
  }
}

TEST_CASE(
    "inspect: qkv patch's restored fractions, and one clear error for inputs of two lengths") {
  const RunResult r = run_qkv("patch '" + runs().file("copy") +
                              "' --clean '1 2 3 4 5' --corrupt '1 2 3 4 7' --json --threads 1");
  INFO(r.output);
  if (r.output.find("give the same answer") != std::string::npos)
    QKV_SKIP("the tiny copy model gives both inputs the same answer");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  CHECK(j["heads"].size() == 12);  // encoder, decoder and cross: 2 layers x 2 heads each
  CHECK(j["residual"].size() == 2);
  CHECK(j["residual"][0].size() == 5);
  // The source differs at the last position only: patching any other position of the first
  // block's input changes nothing, patching that one restores everything.
  for (int p = 0; p < 4; ++p) CHECK(j["residual"][0][p].get<double>() == 0.0);
  CHECK(j["residual"][0][4].get<double>() == Approx(1.0).margin(1e-9));
  const RunResult bad =
      run_qkv("patch '" + runs().file("copy") + "' --clean '1 2 3 4 5' --corrupt '1 2 3'");
  CHECK(bad.status == 1);
  CHECK(bad.output ==
        "qkv: patch: the corrupted input has 3 tokens and the clean one 5: patching puts each "
        "position of one run into the other, so they need the same length\n");
}

TEST_CASE("inspect: qkv heads gives every head a row, and writes a heatmap per score") {
  const TempDir out("inspect_heads");
  const RunResult r = run_qkv("heads '" + runs().file("lm") + "' --json --threads 1 --out '" +
                              out.file("maps") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // the JSON object, then stderr's note of the heatmaps written
  const size_t from = r.output.find('{'), to = r.output.rfind('}');
  REQUIRE(to != std::string::npos);
  CHECK(r.output.substr(to + 1).find("wrote ") != std::string::npos);
  const auto j = nlohmann::json::parse(r.output.substr(from, to + 1 - from));
  const auto& heads = j["heads"];
  REQUIRE(heads.size() >= 2);
  CHECK(heads[0]["head"] == "0.0");
  for (const auto& h : heads) {
    CHECK(h["importance"].get<double>() >= 0);
    CHECK(h.contains("induction"));
    CHECK_FALSE(h.contains("alignment"));
  }
  CHECK(std::filesystem::exists(out.file("maps/self_importance.png")));
  CHECK(std::filesystem::exists(out.file("maps/self_induction.png")));
  const RunResult s2s = run_qkv("heads '" + runs().file("copy") + "' --json --threads 1");
  REQUIRE(s2s.status == 0);
  const auto k = nlohmann::json::parse(s2s.output);
  CHECK(k["heads"].size() == 12);
  CHECK(k["heads"][11]["head"] == "cross.1.1");
  CHECK(k["heads"][11].contains("alignment"));
}

namespace {

// The column names under `qkv heads`' header line of an attention ("cross head  importance ...").
std::vector<std::string> header_of(const std::string& table, const std::string& attention) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(attention + " head ", 0) == 0) {
      std::istringstream words(line.substr(attention.size() + 5));
      std::vector<std::string> out;
      for (std::string w; words >> w;) out.push_back(w);
      return out;
    }
  return {};
}

}  // namespace

TEST_CASE("inspect: every score of the registry is a column of qkv heads, its JSON and the API's") {
  // The copy run has every kind of attention (self and cross): each score has heads to score.
  const std::string run = runs().file("copy");
  const RunResult text = run_qkv("heads '" + run + "' --threads 1");
  const RunResult cli = run_qkv("heads '" + run + "' --json --threads 1");
  INFO(text.output << cli.output);
  REQUIRE(text.status == 0);
  REQUIRE(cli.status == 0);
  const nlohmann::json j = nlohmann::json::parse(cli.output);
  // The server's answer to POST /api/runs/copy/heads (server.cpp sends it as it is), and to
  // GET /api/head_columns.
  serve::Model served(run, "best");
  const nlohmann::json api = served.heads({}, {});
  CHECK(api["columns"] == j["columns"]);
  CHECK(inspect::head_columns_json() == j["columns"]);
  // the model's sites, in its order, as the rows name them
  CHECK(api["sites"] == j["sites"]);
  std::vector<std::string> sites;
  for (const auto& s : j["sites"]) sites.push_back(s["name"]);
  CHECK(sites == std::vector<std::string>{"encoder", "decoder", "cross"});
  CHECK(j["sites"][2]["title"] == "cross-attention");
  for (const interp::HeadScoreInfo& s : interp::kHeadScores) {
    INFO(s.name);
    const auto column = std::find_if(j["columns"].begin(), j["columns"].end(),
                                     [&](const nlohmann::json& c) { return c["name"] == s.name; });
    REQUIRE(column != j["columns"].end());
    CHECK((*column)["title"] == s.title);
    CHECK((*column)["description"] == s.description);
    for (const char* attention : {"encoder", "decoder", "cross"}) {
      INFO(attention);
      const bool cross = std::string(attention) == "cross";
      const bool meant = s.attention == interp::ScoredAttention::any ||
                         (s.attention == interp::ScoredAttention::cross) == cross;
      const std::vector<std::string> header = header_of(text.output, attention);
      REQUIRE(header.size() >= 3);
      CHECK((std::find(header.begin(), header.end(), s.name) != header.end()) == meant);
      for (const nlohmann::json* table : {&j, &api})
        for (const auto& row : (*table)["heads"])
          if (row["attention"] == attention) CHECK(row.contains(s.name) == meant);
    }
  }
  // The text table's header is the JSON row's columns, in the columns' order.
  std::vector<std::string> cross_keys;
  for (const auto& c : j["columns"])
    if (j["heads"][11].contains(c["name"].get<std::string>())) cross_keys.push_back(c["name"]);
  CHECK(header_of(text.output, "cross") == cross_keys);
}

TEST_CASE("inspect: --ablate with no heads changes no bit, every head may go, bad heads fail") {
  // appended, not "'" + path + "'": GCC 12 warns -Wrestrict on that form (its bug 105651)
  std::string lm = "'", copy = "'";
  lm += runs().file("lm") + "'";
  copy += runs().file("copy") + "'";
  for (const std::string precision : {"fp32", "bf16"}) {
    const std::string p = " --threads 1 --precision " + precision;
    const RunResult plain = run_qkv("eval " + lm + " --json" + p);
    REQUIRE(plain.status == 0);
    CHECK(run_qkv("eval " + lm + " --json --ablate ''" + p).output == plain.output);
    const RunResult t0 = run_qkv("translate " + copy + " '1 2 3 4 5'" + p);
    CHECK(run_qkv("translate " + copy + " '1 2 3 4 5' --ablate ''" + p).output == t0.output);
    const RunResult g0 = run_qkv("generate " + lm + " --tokens 20 --quiet" + p);
    CHECK(run_qkv("generate " + lm + " --tokens 20 --quiet --ablate ''" + p).output == g0.output);
  }
  const RunResult all = run_qkv("eval " + lm +
                                " --json --threads 1 --ablate 0.0,0.1,0.2,0.3,"
                                "1.0,1.1,1.2,1.3");
  INFO(all.output);
  CHECK(all.status == 0);
  const RunResult bad = run_qkv("translate " + copy + " '1 2' --ablate cross.2.0");
  CHECK(bad.status == 1);
  CHECK(bad.output ==
        "qkv: translate --ablate: no head cross.2.0 (nearest: cross.1.0): layers 0..1, heads "
        "0..1\n");
  // A stray comma is never read as "no more heads": the same one line as ',' alone.
  for (const std::string spec : {",", "cross.0.1,", "cross.0.1,,cross.1.0"}) {
    const RunResult comma = run_qkv("translate " + copy + " '1 2' --ablate '" + spec + "'");
    CHECK(comma.status == 1);
    CHECK(comma.output == "qkv: translate --ablate: an empty head name in '" + spec + "'\n");
  }
  const RunResult longer = run_qkv("lens " + lm + " 'First Citizen, hear me speak'");
  CHECK(longer.status == 1);
  CHECK(longer.output.find("more than the model's context of 16") != std::string::npos);
}

TEST_CASE("inspect: direct logit attributions plus the bias terms sum to the logit") {
  for (const Case& c : cases()) {
    INFO(c.run << " " << c.precision);
    const auto inf = open(c);
    const data::Ids input = inf->encode(c.clean, "test");
    if (c.run == "copy") {  // post-LN: refused, saying why
      CHECK_THROWS_WITH(inspect::direct_logit_attribution(*inf, input, 4),
                        Catch::Contains("needs a pre-LN model (model.norm_first = true)"));
      continue;
    }
    for (const int64_t target : {int64_t{5}, int64_t{20}}) {
      const inspect::Attribution a = inspect::direct_logit_attribution(*inf, input, target);
      double total = 0, size = 0;
      for (const auto& p : a.parts) total += p.logit, size += std::abs(p.logit);
      // bf16: the model's products round their inputs to 8 bits of mantissa; the parts are
      // computed from the float32 weights, so they agree to that rounding (2^-8) of their size.
      CHECK(a.parts.front().name == "embed");
      CHECK(a.parts.size() >= 2 * 4 + 2 + 1);  // 2 layers x 4 heads, 2 MLPs, the embedding
      CHECK(total == Approx(a.logit).margin(c.precision == "fp32" ? 1e-4 : size / 256));
      const Tensor logits = inf->logits(input, {});
      CHECK(a.logit ==
            Approx(logits.select(0, logits.size(0) - 1).to(DType::f64).data<double>()[target])
                .margin(0));
    }
  }
}

TEST_CASE("inspect: an ablation scope composes with each call's own hooks, per thread") {
  for (const Case& c : cases()) {
    INFO(c.run << " " << c.precision);
    const auto inf = open(c);
    const data::Ids ids = inf->encode(c.clean, "test");
    const std::vector<std::string> specs =
        c.run == "lm" ? std::vector<std::string>{"0.0", "1.1,0.1", ""}
                      : std::vector<std::string>{"cross.1.0", "encoder.0.1,decoder.1.1", ""};
    // Alone, on this thread: the lens (hooks of its own, inside the ablation's scope) still
    // reads the ablated model's logits at its last layer; and the ablation as a scope around
    // the call is the ablation handed to the call as its own layer. (An encoder-decoder reads
    // the ablated model's own greedy output, as the lens does.)
    std::vector<Tensor> alone;
    std::vector<data::Ids> tgt_in;
    for (const std::string& spec : specs) {
      INFO(spec);
      {
        const inspect::Ablation ablation(*inf, spec, "test");
        tgt_in.push_back(inf->inspect(ids).tgt_in);
        alone.push_back(inf->logits(ids, tgt_in.back()));
        const inspect::Lens lens = inspect::logit_lens(*inf, ids, 3);
        CHECK(same_bits(lens.logits, alone.back()));
        CHECK(same_bits(lens.layers.back().logits, alone.back()));
      }
      nn::Hooks own;
      const auto atts = inspect::attentions_of(*inf);
      inspect::add_zero_ablation(own, inspect::parse_heads(spec, atts, "test"));
      CHECK(same_bits(inf->logits(ids, tgt_in.back(), &own), alone.back()));
    }
    CHECK_FALSE(same_bits(alone[0], alone[2]));  // the ablation removed something
    // Together: a thread per ablation, each asking several times while the others ask theirs;
    // each thread's scope reaches its own calls only.
    std::vector<std::vector<Tensor>> together(specs.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < specs.size(); ++i)
      threads.emplace_back([&, i] {
        const inspect::Ablation ablation(*inf, specs[i], "test");
        for (int r = 0; r < 3; ++r) together[i].push_back(inf->logits(ids, tgt_in[i]));
      });
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < specs.size(); ++i)
      for (const Tensor& t : together[i]) CHECK(same_bits(t, alone[i]));
  }
}
