#include "gemm_shapes.hpp"

#include <cstdio>

#include "bench_util.hpp"
#include "core/gemm_stats.hpp"
#include "core/parallel.hpp"

namespace qkv::bench {

namespace {

nlohmann::json shapes_json(const std::vector<GemmShapeStats>& stats, int steps) {
  nlohmann::json out = nlohmann::json::array();
  for (const GemmShapeStats& s : stats) {
    const double flops = 2.0 * double(s.n) * double(s.m) * double(s.k) * double(s.calls);
    out.push_back({{"n", s.n},
                   {"m", s.m},
                   {"k", s.k},
                   {"op", std::string(s.trans_a ? "T" : "N") + (s.trans_b ? "T" : "N")},
                   {"backend", s.bf16 ? "oneDNN bf16" : "OpenBLAS f32"},
                   {"batch", s.batch},
                   {"calls_per_step", double(s.calls) / steps},
                   {"ms_per_step", 1e3 * s.seconds / steps},
                   {"gflops", s.seconds > 0 ? flops / s.seconds / 1e9 : 0.0}});
  }
  return out;
}

}  // namespace

nlohmann::json profile_steps(const std::function<void()>& step, int steps) {
  gemm_stats_enable(true);
  parallel_stats_enable(true);
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const ParallelStats par = parallel_stats();
  parallel_stats_enable(false);
  const std::vector<GemmShapeStats> stats = gemm_stats();
  gemm_stats_enable(false);
  const double per_step = 1e3 / steps;
  return {
      {"gemm_shapes", shapes_json(stats, steps)},
      {"parallel_regions",
       {{"step_ms", wall * per_step},
        {"regions_per_step", double(par.regions) / steps},
        {"ms_per_step", par.seconds * per_step},
        {"busy_ms_per_step", {par.busy_seconds[0] * per_step, par.busy_seconds[1] * per_step}}}}};
}

void print_gemm_shapes(const std::string& model, const nlohmann::json& shapes, double step_ms,
                       double peak_gflops, const std::string& peak_name) {
  std::printf("\nGEMMs in one training step of %s (qkv), largest total first:\n\n", model.c_str());
  const bool loop = !shapes.empty() && shapes.front().contains("loop_ms_per_step");
  std::printf(
      "| C (n x m) = op(A) op(B), k | op | backend | calls/step | ms/step | share of step | "
      "GFLOP/s | %% %s |%s\n|---|---|---|---:|---:|---:|---:|---:|%s\n",
      peak_name.c_str(), loop ? (" alone in a loop, ms/step | % " + peak_name + " |").c_str() : "",
      loop ? "---:|---:|" : "");
  double total_ms = 0, total_flop = 0, loop_ms = 0;
  for (const nlohmann::json& s : shapes) {
    const double ms = s["ms_per_step"].get<double>(), gf = s["gflops"].get<double>();
    total_ms += ms;
    total_flop += gf * ms * 1e6;
    std::printf("| %lld x %lld, k %lld | %s | %s | %g | %.2f | %.1f%% | %.0f | %.0f%% |",
                static_cast<long long>(s["n"].get<int64_t>()),
                static_cast<long long>(s["m"].get<int64_t>()),
                static_cast<long long>(s["k"].get<int64_t>()), s["op"].get<std::string>().c_str(),
                s.value("backend", "OpenBLAS f32").c_str(), s["calls_per_step"].get<double>(), ms,
                100 * ms / step_ms, gf, 100 * gf / peak_gflops);
    if (loop) {
      loop_ms += s["loop_ms_per_step"].get<double>();
      std::printf(" %.2f | %.0f%% |", s["loop_ms_per_step"].get<double>(),
                  100 * s["loop_gflops"].get<double>() / peak_gflops);
    }
    std::printf("\n");
  }
  const double gf = total_ms > 0 ? total_flop / (total_ms * 1e6) : 0;
  std::printf("| all GEMMs | | | | %.2f | %.1f%% | %.0f | %.0f%% |", total_ms,
              100 * total_ms / step_ms, gf, 100 * gf / peak_gflops);
  if (loop)
    std::printf(" %.2f | %.0f%% |", loop_ms,
                loop_ms > 0 ? 100 * total_flop / (loop_ms * 1e6) / peak_gflops : 0.0);
  std::printf("\n");
}

void print_parallel_regions(const nlohmann::json& p) {
  const double step = p["step_ms"].get<double>(), in = p["ms_per_step"].get<double>();
  const double regions = p["regions_per_step"].get<double>();
  if (regions == 0) {
    std::printf("\nParallel regions: none (one thread); the whole %.2f ms step runs on it.\n",
                step);
    return;
  }
  const nlohmann::json& busy = p["busy_ms_per_step"];
  std::printf(
      "\nParallel regions in the same steps: %.0f a step, %.2f of the %.2f ms (%.0f%%); inside "
      "them threads 0 and 1 work %.0f%% and %.0f%% of the time (the rest is fork, join and "
      "waiting for each other). %.2f ms a step (%.0f%%) runs on one thread between them.\n",
      regions, in, step, 100 * in / step, 100 * busy[0].get<double>() / in,
      100 * busy[1].get<double>() / in, step - in, 100 * (step - in) / step);
}

}  // namespace qkv::bench
