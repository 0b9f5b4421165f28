// qkv bench's step in two (apps/bench_models.hpp, bench/loop_rate.hpp): the products a known
// model's step records, shape by shape, and their time at the loop rate summed from exactly
// those shapes. Times are not asserted, only how they add up.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "apps/bench_models.hpp"

using qkv::app::find_model;
using qkv::app::run_one;

TEST_CASE("bench: gpt-char's step records its products, and their loop time is summed from them") {
  const nlohmann::json j = run_one(find_model("gpt-char"), 0, false, true);
  // gpt-char: batch 12 x 64 tokens = 768 rows, d 128, d_ff 512, 4 layers, 65 characters; per
  // layer the four attention projections and the two FFN layers, then the output layer; each a
  // forward product x W^T (NT), dx = g W (NN) and dW = g^T x (TN).
  using Shape = std::tuple<int64_t, int64_t, int64_t, std::string>;
  const std::map<Shape, double> expected = {
      {{768, 128, 128, "NT"}, 16}, {{768, 128, 128, "NN"}, 16}, {{128, 128, 768, "TN"}, 16},
      {{768, 512, 128, "NT"}, 4},  {{768, 512, 128, "NN"}, 4},  {{512, 128, 768, "TN"}, 4},
      {{768, 128, 512, "NT"}, 4},  {{768, 128, 512, "NN"}, 4},  {{128, 512, 768, "TN"}, 4},
      {{768, 65, 128, "NT"}, 1},   {{768, 128, 65, "NN"}, 1},   {{65, 128, 768, "TN"}, 1}};
  std::map<Shape, double> recorded;
  double loop_ms = 0;
  for (const nlohmann::json& s : j.at("gemm_shapes")) {
    const Shape key{s["n"].get<int64_t>(), s["m"].get<int64_t>(), s["k"].get<int64_t>(),
                    s["op"].get<std::string>()};
    recorded[key] += s["calls_per_step"].get<double>();
    CHECK(s["batch"] == 1);
    CHECK(s["loop_ms_per_step"].get<double>() > 0);
    loop_ms += s["loop_ms_per_step"].get<double>();
  }
  CHECK(recorded == expected);
  CHECK(j["products_loop_ms"].get<double>() == Approx(loop_ms).epsilon(1e-12));
}

TEST_CASE("bench: without --gemm-shapes a step still reports its products at their loop rate") {
  const nlohmann::json j = run_one(find_model("tiny"), 0, false, false);
  CHECK_FALSE(j.contains("gemm_shapes"));
  CHECK(j["products_loop_ms"].get<double>() > 0);
}
