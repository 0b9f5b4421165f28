// `qkv bench --gemm-shapes`: where a training step's GEMM time goes, shape by shape
// (core/gemm_stats.hpp), and at what rate each shape runs inside the step, so a profile can
// say which products hold a model back from the machine's sgemm peak.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::bench {

// Runs step() `steps` times with the GEMM and parallel-region timers on and returns
// {"gemm_shapes": [{"n", "m", "k", "op" ("NT": A as is, B transposed), "backend", "batch"
// (products per call), "calls_per_step" (products), "ms_per_step", "gflops"}, ...] largest total
// first, "parallel_regions": {"step_ms",
// "regions_per_step", "ms_per_step" (inside regions), "busy_ms_per_step" [thread 0, 1]}}.
// The timers are off again afterwards.
nlohmann::json profile_steps(const std::function<void()>& step, int steps);

// A markdown table of one model's shapes: calls and ms per step, the share of the whole step
// (step_ms), GFLOP/s and the share of the peak (peak_name: "sgemm peak", ...); where the entries
// have their loop rates (bench/loop_rate.hpp), each shape alone in a loop too; then the GEMMs'
// total.
void print_gemm_shapes(const std::string& model, const nlohmann::json& shapes, double step_ms,
                       double peak_gflops, const std::string& peak_name = "sgemm peak");
// One paragraph: the step's time inside parallel regions, how busy each thread is there, and
// the time on one thread between them (from profile_steps' "parallel_regions").
void print_parallel_regions(const nlohmann::json& parallel_regions);

}  // namespace qkv::bench
