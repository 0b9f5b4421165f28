// core/gemm_stats.hpp: the per-shape GEMM timers behind `qkv bench --gemm-shapes`.
#include <catch2/catch.hpp>

#include "core/fused.hpp"
#include "core/gemm_stats.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"

using namespace qkv;

namespace {

const GemmShapeStats* find(const std::vector<GemmShapeStats>& v, int64_t n, int64_t m, int64_t k,
                           bool ta, bool tb) {
  for (const GemmShapeStats& s : v)
    if (s.n == n && s.m == m && s.k == k && s.trans_a == ta && s.trans_b == tb) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("gemm_stats: off records nothing, on it keeps one entry per shape and transpose") {
  Generator g(3);
  const Tensor a = randn({37, 19}, g), b = randn({19, 23}, g), bt = randn({23, 19}, g);
  gemm_stats_enable(false);
  (void)matmul(a, b);
  CHECK(gemm_stats().empty());
  CHECK_FALSE(gemm_stats_enabled());

  gemm_stats_enable(true);
  (void)matmul(a, b);
  (void)matmul(a, b);
  (void)matmul(a, bt.t());                                     // B read transposed
  (void)linear_forward(a, bt, randn({23}, g));                 // x w^T + b: NT too
  (void)matmul(randn({4, 70, 80}, g), randn({4, 80, 90}, g));  // batched: its 4 products
  const std::vector<GemmShapeStats> s = gemm_stats();
  gemm_stats_enable(false);
  REQUIRE(s.size() == 3);
  const GemmShapeStats* nn = find(s, 37, 23, 19, false, false);
  const GemmShapeStats* nt = find(s, 37, 23, 19, false, true);
  const GemmShapeStats* batched = find(s, 70, 90, 80, false, false);
  REQUIRE(nn);
  REQUIRE(nt);
  REQUIRE(batched);
  CHECK(nn->calls == 2);
  CHECK(nt->calls == 2);
  CHECK(batched->calls == 4);
  CHECK(batched->batch == 4);  // the 4 were one call: a loop replays them as one
  CHECK(nn->batch == 1);
  for (const GemmShapeStats& e : s) CHECK(e.seconds > 0);
  for (size_t i = 1; i < s.size(); ++i) CHECK(s[i - 1].seconds >= s[i].seconds);
  CHECK(gemm_stats().empty());  // turning them off clears them
}

TEST_CASE("gemm_stats: a product split into bands across threads counts once") {
  const int before = get_num_threads();
  set_num_threads(2);
  Generator g(4);
  gemm_stats_enable(true);
  (void)matmul(randn({256, 200}, g), randn({200, 192}, g));  // above kBandMinWork: bands
  const std::vector<GemmShapeStats> s = gemm_stats();
  gemm_stats_enable(false);
  set_num_threads(before);
  REQUIRE(s.size() == 1);
  CHECK(s[0].calls == 1);
  CHECK(s[0].n == 256);
  CHECK(s[0].m == 192);
  CHECK(s[0].k == 200);
}
