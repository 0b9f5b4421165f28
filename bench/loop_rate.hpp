// Loop rates for `qkv bench`: each product a training step records (core/gemm_stats.hpp) timed
// alone, in a loop, so a run can split its step into two numbers on any host: the step's
// products at their loop rate, and everything else (the step's time minus theirs: elementwise
// and row kernels, rounding to bf16, attention's tiles, the products' cold operands, fork and
// join, the tape).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>

#include "core/gemm_stats.hpp"

namespace qkv::bench {

// Seconds one product of shape s takes in a loop: the median call over at least 5 calls and
// min_seconds, after 2 that are not timed (they plan oneDNN's primitive and warm the caches).
// float32 through qkv::matmul on views with s's transposes (one batched call of s.batch
// matrices when s.batch > 1), as a step runs them; bfloat16 through oneDNN's GEMM
// (kernel::gemm_bf16) on operands rounded once, as a step's products after their first rounding
// in a PrecisionScope. s.calls and s.seconds are not read.
double seconds_per_product(const GemmShapeStats& s, double min_seconds);

// The shape of one entry of profile_steps' "gemm_shapes" (bench/gemm_shapes.hpp).
GemmShapeStats shape_from_json(const nlohmann::json& entry);

// Adds to each entry of `shapes` (profile_steps' "gemm_shapes") "loop_ms_per_step" =
// calls_per_step x seconds_per_call(its shape) in ms and "loop_gflops", its rate in the loop;
// returns their sum: the step's products at their loop rate, ms. seconds_per_call is
// seconds_per_product in `qkv bench`; a test gives known times.
double add_loop_rates(nlohmann::json& shapes,
                      const std::function<double(const GemmShapeStats&)>& seconds_per_call);

}  // namespace qkv::bench
