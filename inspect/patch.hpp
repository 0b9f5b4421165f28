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
#include "nn/attention_site.hpp"
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

// The two runs activation patching compares, and the restored fraction of any patch of the
// clean run into the corrupted one. Made once per input pair: it runs the inspections that fix
// the output side, the clean run (capturing every z and resid_pre) and the corrupted run.
// The inputs must have the same length, and the two runs different answers (else the fraction
// has no denominator): qkv::Error naming "patch" otherwise.
class PatchRuns {
 public:
  PatchRuns(const run::Inference& inf, const data::Ids& clean, const data::Ids& corrupt);

  const data::Ids& clean() const { return clean_; }
  const data::Ids& corrupt() const { return corrupt_; }
  const data::Ids& tgt_in() const { return tgt_in_; }  // the output side all runs read
  int64_t clean_id() const { return a_; }              // the answers a and b of d(run)
  int64_t corrupt_id() const { return b_; }
  std::string clean_answer, corrupt_answer;
  double clean_diff = 0, corrupt_diff = 0;
  // The clean run's activation at a z or resid_pre hook point: (1, h, n, d_head), (1, n, d).
  const ag::Var& clean_at(const std::string& point) const { return cap_.cache.at(point); }

  // The restored fraction of one corrupted pass under hooks (a layer inside the caller's).
  double restored(nn::Hooks& hooks) const;
  // Patching head h of an attention's layer l at every query position (positions empty), or at
  // the given ones.
  double head(const nn::AttentionSite& att, int64_t l, int64_t h,
              const std::vector<int64_t>& positions = {}) const;
  // Patching the residual hook point (a resid_pre) at one position.
  double residual(const std::string& point, int64_t position) const;

 private:
  const run::Inference& inf_;
  data::Ids clean_, corrupt_, tgt_in_;
  nn::Hooks cap_;
  int64_t a_ = 0, b_ = 0;
};

// Every head and every (layer, position), through PatchRuns.
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
