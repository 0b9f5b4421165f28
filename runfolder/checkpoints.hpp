// A run folder's checkpoints:
//
//   checkpoints/step-00001200/  model.safetensors, optim.safetensors, state.json,
//                               metrics.jsonl (the log so far), manifest.json (checksums)
//   checkpoints/latest, best    the name of the newest and the best checkpoint
//
// A checkpoint folder is complete before it gets its name, so a crash at any moment leaves the
// last good one; reading one verifies it against its manifest (runfolder/integrity.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/model.hpp"
#include "optim/optimizers.hpp"
#include "runfolder/checkpoint_selector.hpp"
#include "train/state.hpp"

namespace qkv::run {

// The training state a checkpoint saves (train/state.hpp).
using TrainState = train::TrainState;

// Writes checkpoints/step-N atomically, points "latest" at it, removes old ones beyond keep
// (never the best), and points "best" at it when is_best.
std::string save_checkpoint(const std::string& run_dir, const nn::Model& model,
                            const optim::Optimizer& opt, const TrainState& st, int64_t keep,
                            bool is_best);
// The names of run_dir's complete step-* checkpoint folders (model, optimizer and state
// written), oldest first; empty when there is none.
std::vector<std::string> step_checkpoints(const std::string& run_dir);
// The checkpoint "latest" (or "best") names; falls back to the newest complete step-* folder.
// Empty when there is none.
std::string find_checkpoint(const std::string& run_dir, const std::string& which = "latest");
// The checkpoint folder `which` names (runfolder/checkpoint_selector.hpp): best, latest (each
// falling back to the newest complete checkpoint), average (runfolder/average.hpp), a step-N
// folder's name, or the path of a checkpoint folder; an error naming --checkpoint when it is not
// there.
std::string resolve_checkpoint(const std::string& run_dir, const CheckpointSelector& which);
// The same, parsed from its text (parse_checkpoint_selector's error for a bad one).
std::string resolve_checkpoint(const std::string& run_dir, const std::string& which);
// Loads model weights (and, when opt is non-null, the optimizer state) and returns the state.
// Files are verified against the checkpoint's manifest.json, weights must be finite
// (runfolder/integrity.hpp); errors name the damaged file.
TrainState load_checkpoint(const std::string& ckpt_dir, nn::Model& model, optim::Optimizer* opt);

}  // namespace qkv::run
