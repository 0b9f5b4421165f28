// What causes an output: activation patching (Meng et al. 2022, "Locating and Editing Factual
// Associations in GPT", causal tracing; Wang et al. 2022, "Interpretability in the Wild", path
// patching's simplest case; TransformerLens's patching module). A clean and a corrupted input
// of the same length run through the model; one activation of the clean run is put into the
// corrupted run, and the metric says how much of the clean behaviour comes back:
//
//   d(run)   = logit(clean answer) - logit(corrupted answer), at the last output position
//   restored = (d(patched) - d(corrupted)) / (d(clean) - d(corrupted))
//
// 0: the patch changes nothing, 1: the clean run's difference is back. The answers are each
// run's most likely next token there. Patched:
//   heads     each attention's (layer, head) output z
//   residual  the residual stream entering each block (resid_pre), at one position: the
//             input side's (a language model's blocks, an encoder-decoder's encoder over the
//             source positions, where the two inputs differ)
// An encoder-decoder's decoder reads the clean input's greedy output in all three runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.hpp"
#include "data/dataset.hpp"
#include "nn/hooks.hpp"

namespace qkv::run {
class Inference;
}

namespace qkv::inspect {

struct PatchedHead {
  std::string attention, name;  // "cross", "cross.1.0"
  int64_t layer = 0, head = 0;
  double restored = 0;
};

struct Patching {
  std::string clean_answer, corrupt_answer;
  double clean_diff = 0, corrupt_diff = 0;  // d(clean), d(corrupted)
  std::vector<PatchedHead> heads;
  std::string stream;                         // e.g. "blocks.{L}.resid_pre"
  std::vector<std::string> positions;         // the residual's position labels (the clean input's)
  std::vector<std::vector<double>> residual;  // [layer][position] restored fraction
};

// The metric of logits (T, V) at the last position: logit[a] - logit[b].
double logit_difference(const Tensor& logits, int64_t a, int64_t b);

// Every head and every (layer, position). The inputs must have the same length, and the two
// runs different answers (else the fraction has no denominator): qkv::Error otherwise.
Patching patch_activations(const run::Inference& inf, const data::Ids& clean,
                           const data::Ids& corrupt);

// The result as `qkv patch --json` prints it and the Python module's run.patch returns it:
// {"clean_answer", "corrupt_answer", "clean_diff", "corrupt_diff", "heads": [{"attention",
// "head", "layer", "index", "restored"}...], "stream", "positions", "residual"}.
nlohmann::json patch_json(const Patching& r);

// Hooks that put the clean run's residual `point` (1, n, d) into a run at `positions`.
void add_residual_patch(nn::Hooks& hooks, const std::string& point, const ag::Var& clean,
                        const std::vector<int64_t>& positions);

}  // namespace qkv::inspect
