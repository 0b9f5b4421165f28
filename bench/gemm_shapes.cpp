#include "gemm_shapes.hpp"

#include <cstdio>

#include "core/gemm_stats.hpp"

namespace qkv::bench {

nlohmann::json time_gemm_shapes(const std::function<void()>& step, int steps) {
  gemm_stats_enable(true);
  for (int i = 0; i < steps; ++i) step();
  const std::vector<GemmShapeStats> stats = gemm_stats();
  gemm_stats_enable(false);
  nlohmann::json out = nlohmann::json::array();
  for (const GemmShapeStats& s : stats) {
    const double flops = 2.0 * double(s.n) * double(s.m) * double(s.k) * double(s.calls);
    out.push_back({{"n", s.n},
                   {"m", s.m},
                   {"k", s.k},
                   {"op", std::string(s.trans_a ? "T" : "N") + (s.trans_b ? "T" : "N")},
                   {"calls_per_step", double(s.calls) / steps},
                   {"ms_per_step", 1e3 * s.seconds / steps},
                   {"gflops", s.seconds > 0 ? flops / s.seconds / 1e9 : 0.0}});
  }
  return out;
}

void print_gemm_shapes(const std::string& model, const nlohmann::json& shapes, double step_ms,
                       double peak_gflops) {
  std::printf("\nGEMMs in one training step of %s (qkv), largest total first:\n\n", model.c_str());
  std::printf(
      "| C (n x m) = op(A) op(B), k | op | calls/step | ms/step | share of step | GFLOP/s | "
      "%% sgemm peak |\n|---|---|---:|---:|---:|---:|---:|\n");
  double total_ms = 0, total_flop = 0;
  for (const nlohmann::json& s : shapes) {
    const double ms = s["ms_per_step"].get<double>(), gf = s["gflops"].get<double>();
    total_ms += ms;
    total_flop += gf * ms * 1e6;
    std::printf("| %lld x %lld, k %lld | %s | %g | %.2f | %.1f%% | %.0f | %.0f%% |\n",
                static_cast<long long>(s["n"].get<int64_t>()),
                static_cast<long long>(s["m"].get<int64_t>()),
                static_cast<long long>(s["k"].get<int64_t>()), s["op"].get<std::string>().c_str(),
                s["calls_per_step"].get<double>(), ms, 100 * ms / step_ms, gf,
                100 * gf / peak_gflops);
  }
  const double gf = total_ms > 0 ? total_flop / (total_ms * 1e6) : 0;
  std::printf("| all GEMMs | | | %.2f | %.1f%% | %.0f | %.0f%% |\n", total_ms,
              100 * total_ms / step_ms, gf, 100 * gf / peak_gflops);
}

}  // namespace qkv::bench
