// bench/loop_rate.hpp: the step's products at their loop rate, summed from the recorded shapes
// (here with known times per product: no timing is asserted), and each shape replayed as the
// step runs it.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "bench/loop_rate.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::bench;

namespace {

nlohmann::json entry(int64_t n, int64_t m, int64_t k, const char* op, const char* backend,
                     double calls_per_step, int64_t batch = 1) {
  return {{"n", n},
          {"m", m},
          {"k", k},
          {"op", op},
          {"backend", backend},
          {"batch", batch},
          {"calls_per_step", calls_per_step},
          {"ms_per_step", 1.0},
          {"gflops", 1.0}};
}

}  // namespace

TEST_CASE("loop rate: the products' time is calls per step x each shape's time per product") {
  nlohmann::json shapes = nlohmann::json::array();
  shapes.push_back(entry(768, 128, 128, "NT", "oneDNN bf16", 16));
  shapes.push_back(entry(128, 512, 768, "TN", "oneDNN bf16", 4));
  shapes.push_back(entry(70, 90, 80, "NN", "OpenBLAS f32", 8, 4));  // two batched calls of 4
  std::vector<GemmShapeStats> asked;
  const double ms = add_loop_rates(shapes, [&](const GemmShapeStats& s) {
    asked.push_back(s);
    return s.bf16 ? (s.trans_a ? 3e-4 : 1e-4) : 2e-5;
  });
  // 16 x 0.1 ms + 4 x 0.3 ms + 8 x 0.02 ms
  CHECK(ms == Approx(1.6 + 1.2 + 0.16).epsilon(1e-12));
  CHECK(shapes[0]["loop_ms_per_step"].get<double>() == Approx(1.6).epsilon(1e-12));
  CHECK(shapes[1]["loop_ms_per_step"].get<double>() == Approx(1.2).epsilon(1e-12));
  CHECK(shapes[2]["loop_ms_per_step"].get<double>() == Approx(0.16).epsilon(1e-12));
  // 2 x 768 x 128 x 128 flop in 0.1 ms
  CHECK(shapes[0]["loop_gflops"].get<double>() == Approx(2.0 * 768 * 128 * 128 / 1e-4 / 1e9));
  // each shape read back as recorded
  REQUIRE(asked.size() == 3);
  CHECK((asked[0].n == 768 && asked[0].m == 128 && asked[0].k == 128));
  CHECK((!asked[0].trans_a && asked[0].trans_b && asked[0].bf16 && asked[0].batch == 1));
  CHECK((asked[1].trans_a && !asked[1].trans_b));
  CHECK((!asked[2].bf16 && asked[2].batch == 4 && !asked[2].trans_a && !asked[2].trans_b));
}

TEST_CASE("loop rate: each shape runs in a loop, float32 batched and transposed") {
  for (const char* op : {"NN", "NT", "TN", "TT"}) {
    GemmShapeStats s;
    s.n = 33, s.m = 17, s.k = 40, s.trans_a = op[0] == 'T', s.trans_b = op[1] == 'T';
    for (int64_t batch : {1, 3}) {
      s.batch = batch;
      CHECK(seconds_per_product(s, 0) > 0);
    }
  }
}

TEST_CASE("loop rate: bf16 shapes run on oneDNN's GEMM") {
  SKIP_WITHOUT_BF16();
  for (const char* op : {"NT", "NN", "TN"}) {
    GemmShapeStats s;
    s.n = 65, s.m = 48, s.k = 96, s.trans_a = op[0] == 'T', s.trans_b = op[1] == 'T';
    s.bf16 = true;
    CHECK(seconds_per_product(s, 0) > 0);
  }
}
