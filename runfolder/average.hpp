// Checkpoint averaging (as fairseq's scripts/average_checkpoints.py): the element-wise mean of
// the model weights of a run's last N checkpoints, written as a checkpoint of its own, which
// eval, translate and generate load like any other (--checkpoint average, or its folder).
//
//   qkv average RUN --last N [--out DIR]       (apps/average.cpp)
//   [checkpoint] average_last = N              the final test evaluates the average
//
// The last N are the N highest step-* checkpoints that exist (checkpoint.keep decides how many
// a run keeps). The average is taken in float64 and rounded once to the weights' dtype, so N
// identical checkpoints average to themselves bit for bit. The averaged folder holds the
// averaged model.safetensors, the newest checkpoint's optim.safetensors and state.json (with
// "averaged": the names of the checkpoints), and its own manifest.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::run {

// The folder name of the average inside RUN/checkpoints.
inline constexpr const char* kAverageCheckpoint = "average";

// The newest n complete step-* checkpoints of run_dir, oldest first. Throws qkv::Error naming
// the run when it is no run folder, has no checkpoint, or n < 1; when it has fewer than n,
// all of them (exact = true: insist on n, an error naming how many there are).
std::vector<std::string> last_checkpoints(const std::string& run_dir, int64_t n, bool exact = true);

// Averages the model weights of ckpts (checkpoint folders, each verified against its manifest;
// the same tensor names, shapes and dtypes in all, else an error naming the first misfit) into
// a checkpoint folder out_dir, written atomically (a temporary folder beside it, renamed).
void average_checkpoints(const std::vector<std::string>& ckpts, const std::string& out_dir);

}  // namespace qkv::run
