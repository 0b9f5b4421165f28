// A reduced trainer for experiments (qkv saturation): trains a fresh model on a config's data
// for a fixed number of steps, in memory, and returns the loss curve and the attention entropy
// of every step. No run folder, checkpoints or validation; the same model, loader, optimizer,
// schedule and clipping as `qkv train`, so the same config trains the same way.
#pragma once
#include <cstdint>
#include <vector>

#include "config/config.hpp"

namespace qkv::app {

struct LiteCurve {
  std::vector<int64_t> step;    // 1, 2, ..., steps
  std::vector<double> loss;     // training cross-entropy of each step's batch (nats / token)
  std::vector<double> entropy;  // mean attention entropy of that step over all layers and kinds
  std::vector<double> cross_entropy_attention;  // the decoder cross-attention's alone
  double seconds = 0;
};

// Trains for `steps` optimizer steps (the cosine schedule, when chosen without a length,
// decays over them). Deterministic for a given config and thread count.
LiteCurve train_lite(const RunConfig& cfg, int64_t steps);

}  // namespace qkv::app
