// `qkv bench --gemm-shapes`: where a training step's GEMM time goes, shape by shape
// (core/gemm_stats.hpp), and at what rate each shape runs inside the step, so a profile can
// say which products hold a model back from the machine's sgemm peak.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::bench {

// Runs step() `steps` times with the GEMM timers on and returns, largest total first,
// [{"n", "m", "k", "op" ("NT": A as is, B transposed), "calls_per_step", "ms_per_step",
// "gflops"}, ...]. The timers are off again afterwards.
nlohmann::json time_gemm_shapes(const std::function<void()>& step, int steps);

// A markdown table of one model's shapes: calls and ms per step, the share of the whole step
// (step_ms), GFLOP/s and the share of the sgemm peak; then the GEMMs' total.
void print_gemm_shapes(const std::string& model, const nlohmann::json& shapes, double step_ms,
                       double peak_gflops);

}  // namespace qkv::bench
