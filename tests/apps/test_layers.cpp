// qkv layers: the quick sweep runs and writes every layer and n; the exact columns (sequential
// steps, FLOPs) against their definitions; the gradient-norm profile's structure (a causal
// conv stack reaches exactly its receptive field, attention reaches every position). Timings
// are measurements and are never asserted.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "figures/layer_study.hpp"
#include "figures/length_study.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::figures;
using namespace qkv::testing;
using nlohmann::json;

namespace {

const TempDir& quick_dir() {
  static TempDir dir("layers");
  return dir;
}

const json& quick_run() {
  static json j = [] {
    app::LayersArgs a;
    a.out = quick_dir().path.string();
    a.quick = true;
    REQUIRE(app::cmd_layers(a) == 0);
    return json::parse(read_file(quick_dir().file("layers.json")));
  }();
  return j;
}

}  // namespace

TEST_CASE("layers --quick writes every layer at every n, and both figures") {
  const json& j = quick_run();
  const std::vector<int64_t> ns = {8, 16, 32};
  REQUIRE(j.at("layers").size() == 4);
  std::vector<std::string> names;
  for (const json& l : j.at("layers")) {
    names.push_back(l.at("layer"));
    CHECK(l.at("n").get<std::vector<int64_t>>() == ns);
    for (const char* col : {"seconds", "flops_forward", "sequential_steps"})
      CHECK(l.at(col).size() == ns.size());
    CHECK(l.at("exponent").is_number());
    CHECK(l.at("profile").size() == 16);  // quick's profile length
    for (double s : l.at("seconds").get<std::vector<double>>()) CHECK(s > 0);
  }
  CHECK(names == std::vector<std::string>{"attention", "gru", "lstm", "conv"});
  CHECK(std::filesystem::file_size(quick_dir().file("time.svg")) > 0);
  CHECK(std::filesystem::file_size(quick_dir().file("path.svg")) > 0);
}

TEST_CASE("layers: sequential steps are n for the recurrences and 1 for attention and conv") {
  for (const json& l : quick_run().at("layers")) {
    const std::string name = l.at("layer");
    const auto n = l.at("n").get<std::vector<int64_t>>();
    const auto steps = l.at("sequential_steps").get<std::vector<int64_t>>();
    for (size_t i = 0; i < n.size(); ++i) {
      INFO(name << " n " << n[i]);
      CHECK(steps[i] == (name == "gru" || name == "lstm" ? n[i] : 1));
    }
  }
}

TEST_CASE("layers: FLOPs match the formulas on a hand-computed case") {
  LayerStudyOptions o;
  o.d = 4, o.kernel = 3, o.conv_layers = 2;
  // n = 8, d = 4: attention 8 * 8 * 16 + 4 * 64 * 4; GRU 12 * 8 * 16; LSTM 16 * 8 * 16;
  // conv 2 * L 2 * w 3 * 8 * 16.
  CHECK(layer_flops(LayerKind::attention, 8, o) == 2048);
  CHECK(layer_flops(LayerKind::gru, 8, o) == 1536);
  CHECK(layer_flops(LayerKind::lstm, 8, o) == 2048);
  CHECK(layer_flops(LayerKind::conv, 8, o) == 1536);
  // and the JSON carries the same formula at quick's d = 16
  LayerStudyOptions q;
  q.d = 16;
  for (const json& l : quick_run().at("layers"))
    if (l.at("layer") == "attention")
      CHECK(l.at("flops_forward").at(2).get<int64_t>() == layer_flops(LayerKind::attention, 32, q));
}

TEST_CASE("layers: a causal conv stack's gradient is exactly zero beyond its receptive field") {
  LayerStudyOptions o;
  o.d = 8, o.heads = 2, o.kernel = 3, o.conv_layers = 2, o.conv_causal = true, o.profile_batch = 2;
  const int64_t n = 16, field = 1 + o.conv_layers * (o.kernel - 1);       // 5 positions: j-4 .. j
  const std::vector<double> p = gradient_profile(LayerKind::conv, n, o);  // p[i], j = n - 1
  for (int64_t i = 0; i < n; ++i) {
    const int64_t distance = n - 1 - i;
    INFO("distance " << distance);
    if (distance < field)
      CHECK(p[static_cast<size_t>(i)] > 0);
    else
      CHECK(p[static_cast<size_t>(i)] == 0.0);
  }
}

TEST_CASE("layers: attention's gradient reaches every distance, at initialisation") {
  LayerStudyOptions o;
  o.d = 8, o.heads = 2, o.profile_batch = 2;
  const std::vector<double> p = gradient_profile(LayerKind::attention, 24, o);
  for (size_t i = 0; i < p.size(); ++i) {
    INFO("position " << i);
    CHECK(p[i] > 0);
  }
}

TEST_CASE("layers --quick trains every encoder on copy and reverse and scores every length") {
  const json& t = quick_run().at("training");
  const std::vector<int64_t> ns = {3, 6, 9};  // quick's: past its training lengths 1..6 too
  CHECK(t.at("settings").at("eval_lengths").get<std::vector<int64_t>>() == ns);
  std::vector<std::string> seen;
  for (const json& c : t.at("curves")) {
    seen.push_back(c.at("model").get<std::string>() + "/" + c.at("task").get<std::string>());
    CHECK(c.at("n").get<std::vector<int64_t>>() == ns);
    for (double e : c.at("exact_match").get<std::vector<double>>()) CHECK((e >= 0 && e <= 1));
    CHECK(c.at("profile_init").size() == 8);  // quick's profile length
    CHECK(c.at("profile_trained").size() == 8);
    CHECK(c.at("profile_trained") != c.at("profile_init"));  // the steps moved the weights
    CHECK(std::isfinite(c.at("final_loss").get<double>()));
  }
  std::vector<std::string> want;
  for (const std::string& m : length_study_models())
    for (const char* task : {"copy", "reverse"}) want.push_back(m + "/" + task);
  CHECK(seen == want);
  for (const char* f : {"exact_match_copy.svg", "exact_match_reverse.svg", "path_trained.svg"})
    CHECK(std::filesystem::file_size(quick_dir().file(f)) > 0);
}

TEST_CASE("layers: a trained encoder keeps its structure: conv's reach, attention's everywhere") {
  // One conv layer of kernel 3 (not causal): memory at j = n - 1 reads embeddings j - 1 and j
  // only, before training and after; attention reads every position.
  for (const json& c : quick_run().at("training").at("curves")) {
    const std::string m = c.at("model");
    if (m != "conv" && m != "attention") continue;
    for (const char* when : {"profile_init", "profile_trained"}) {
      const auto p = c.at(when).get<std::vector<double>>();
      for (size_t dist = 0; dist < p.size(); ++dist) {
        INFO(m << " " << when << " distance " << dist);
        if (m == "conv" && dist > 1)
          CHECK(p[dist] == 0.0);
        else
          CHECK(p[dist] > 0);
      }
    }
  }
}

TEST_CASE("layers: the length study is the same bits for the same seed") {
  LengthStudyOptions o;
  o.models = {"bahdanau"}, o.tasks = {"reverse"};
  o.d = 8, o.heads = 2, o.layers = 1, o.steps = 3, o.batch = 4, o.train_max_len = 4;
  o.eval_lengths = {2, 5}, o.eval_examples = 3, o.profile_length = 4;
  const std::vector<LengthCurve> a = run_length_study(o), b = run_length_study(o);
  REQUIRE(a.size() == 1);
  CHECK(a[0].final_loss == b[0].final_loss);
  CHECK(a[0].exact_match == b[0].exact_match);
  CHECK(a[0].profile_trained == b[0].profile_trained);
  o.steps = 0;  // no training: no study
  CHECK(run_length_study(o).empty());
}

TEST_CASE("layers: bad options are refused with one line") {
  LayerStudyOptions o;
  o.d = 10, o.heads = 4;
  CHECK_THROWS_WITH(gradient_profile(LayerKind::attention, 8, o),
                    Catch::Contains("multiple of heads"));
  o.heads = 2;
  o.lengths = {1, 8};
  CHECK_THROWS_WITH(run_layer_study(o), Catch::Contains("length must be >= 2"));

  LengthStudyOptions l;
  l.models = {"gru", "transformer"};
  CHECK_THROWS_WITH(check_length_study(l),
                    "layers --train-models: unknown model \"transformer\"; valid: attention, gru, "
                    "lstm, conv, gru-no-attention, bahdanau");
  l.models = {"gru"}, l.tasks = {"sort"};
  CHECK_THROWS_WITH(check_length_study(l), Catch::Contains("--train-tasks: unknown task \"sort\""));
  l.tasks = {"copy"}, l.eval_lengths = {4, 0};
  CHECK_THROWS_WITH(check_length_study(l), Catch::Contains("--eval-lengths: every length"));
  l.eval_lengths = {4}, l.d = 9, l.heads = 1;
  CHECK_THROWS_WITH(check_length_study(l), Catch::Contains("must be even"));
  // more than the machine's memory: refused before any training, naming layers' own option
  l.d = 16, l.heads = 2, l.models = {"bahdanau"};
  l.batch = int64_t{1} << 40;
  CHECK_THROWS_WITH(check_length_study(l), Catch::StartsWith("layers (bahdanau on copy): ") &&
                                               Catch::Contains("--train-batch: ") &&
                                               Catch::Contains("memory available"));
  l.batch = 8, l.eval_examples = int64_t{1} << 40;
  CHECK_THROWS_WITH(check_length_study(l), Catch::Contains("--eval-examples: "));
  l.eval_examples = 10;
  CHECK_NOTHROW(check_length_study(l));
}
