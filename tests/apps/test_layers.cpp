// qkv layers: the quick sweep runs and writes every layer and n; the exact columns (sequential
// steps, FLOPs) against their definitions; the gradient-norm profile's structure (a causal
// conv stack reaches exactly its receptive field, attention reaches every position). Timings
// are measurements and are never asserted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "figures/layer_study.hpp"
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

TEST_CASE("layers: bad options are refused with one line") {
  LayerStudyOptions o;
  o.d = 10, o.heads = 4;
  CHECK_THROWS_WITH(gradient_profile(LayerKind::attention, 8, o),
                    Catch::Contains("multiple of heads"));
  o.heads = 2;
  o.lengths = {1, 8};
  CHECK_THROWS_WITH(run_layer_study(o), Catch::Contains("length must be >= 2"));
}
