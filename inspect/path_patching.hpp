// Path patching (Wang et al. 2022, "Interpretability in the Wild"; TransformerLens's direct-path
// form): activation patching (inspect/patch.hpp) of one sender head, restored along one direct
// path at a time. The sender's clean-minus-corrupted contribution to the residual stream,
//
//   delta = (z_clean - z_corrupt)[sender head] W_O   (1, n, d), its sublayer's output difference
//
// is added to one receiver's input only -- a later head's query, key or value input, a later
// MLP's input, or the stream the output layer reads -- in the corrupted run: the sender itself
// and every other reader of the stream stay corrupted, and what the receiver then computes flows
// on to the logits as usual. The metric is qkv patch's restored fraction, with its answers.
//
// Receivers of a head of block Ls (its sublayer reads `resid_pre`, cross-attention `resid_mid`):
//   * the readers of the same stack after its sublayer: each later head's q, k and v (self-
//     attention reads resid_pre; an encoder-decoder's cross-attention's q reads resid_mid) and
//     each MLP (it reads the block's last stream point), in forward order;
//   * the end of the stack (the last block's resid_post) through its final norm: the logits
//     when it is the stream the output layer reads (a language model, a decoder, a classifier's
//     pooled read-out), and every cross-attention head's k and v when it is the encoder's.
// So an encoder head reaches the decoder only through cross-attention's keys and values, a
// decoder head reaches later decoder heads, cross-attention's queries and the logits.
// A receiver's input is recomputed from (stream + delta): its norm (LayerNorm/RMSNorm scale
// included) is the patched run's, not frozen at the corrupted run's -- the final norm too, where
// TransformerLens's direct logit path freezes the scale. That keeps path patching exact as a
// decomposition: restoring every path at once (each receiver reading its stream plus delta,
// later receivers seeing what earlier ones changed) is activation patching of the sender.
// Pre-LN models only: a post-LN block normalises each residual sum, so a head's output is no
// term of what later layers read (qkv::Error naming "patch").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/dataset.hpp"
#include "inspect/heads.hpp"
#include "inspect/patch.hpp"
#include "inspect/work.hpp"

namespace qkv::run {
class Inference;
}

namespace qkv::inspect {

// One direct path of a sender: the receiver and which of its inputs.
struct PathReceiver {
  std::string attention;  // the receiver's site ("cross", "self"); "mlp" or "logits"
  std::string name;       // "cross.1.0", "1.2"; "mlp.1"; "logits"
  int64_t layer = -1, head = -1;
  std::string input;    // "q", "k", "v"; "mlp"; "logits"
  std::string point;    // the hook point it replaces: "blocks.1.attn.q", "blocks.1.mlp.post"
  size_t stage = 0;     // which stream point it reads (Paths::stages)
  double restored = 0;  // filled by path_patching
};

// The direct paths of one sender, from the model's structure (no pass). qkv::Error naming op for
// a post-LN model or a site outside Transformer blocks (a recurrent decoder's attention).
struct Paths {
  HeadRef sender;
  std::string out_point;                // its sublayer's output: "blocks.0.attn_out"
  std::vector<std::string> stages;      // the stream points its receivers read, in forward order
  std::vector<PathReceiver> receivers;  // in forward order
};
Paths direct_paths(const run::Inference& inf, const HeadRef& sender, const char* op);

// A sender's paths restored on one pair of inputs (made from PatchRuns: its clean and corrupted
// runs, answers and metric). Two passes find the sender's delta.
class PathRuns {
 public:
  PathRuns(const run::Inference& inf, const PatchRuns& runs, Paths paths);
  const Paths& paths() const { return paths_; }
  // The restored fraction with delta added to the inputs of the receivers `which` (indices into
  // paths().receivers) at once; each reads its own stream in the patched run plus delta. None:
  // the corrupted run (0). All: activation patching of the sender, up to rounding.
  double restored(const std::vector<size_t>& which) const;
  // Each receiver alone (one pass per stream point and one per receiver).
  std::vector<double> each() const;

 private:
  const run::Inference& inf_;
  const PatchRuns& runs_;
  Paths paths_;
  ag::Var delta_;  // (1, n, d) on the sender's stack
};

struct PathPatching {
  Paths paths;            // receivers[i].restored: that path alone
  double activation = 0;  // patching the sender's output (qkv patch's value for the head)
  double all_paths = 0;   // every path at once (equals activation up to rounding)
};

struct PathPatchingResult {
  std::string clean_answer, corrupt_answer;
  double clean_diff = 0, corrupt_diff = 0;
  std::vector<PathPatching> senders;
};

// Path patching of each sender of spec (parse_heads' names, or "L1H0" / "cross.L1H0"). Errors
// as patch_activations' and direct_paths', and for an empty spec.
PathPatchingResult path_patching(const run::Inference& inf, const data::Ids& clean,
                                 const data::Ids& corrupt, const std::string& spec);

// The senders of spec (parse_heads with the "L1H0" spelling accepted too).
std::vector<HeadRef> path_senders(const run::Inference& inf, const std::string& spec,
                                  const char* op);

// The work of path_patching on inputs of n tokens: the two inspections and runs, and per
// sender its delta (2 passes), each stream point (twice: alone and all paths at once), each
// receiver, the all-paths pass and the activation patch.
Work path_patching_work(const run::Inference& inf, int64_t n, const std::vector<HeadRef>& senders);

// {"method": "path patching", "clean_answer", "corrupt_answer", "clean_diff", "corrupt_diff",
//  "senders": [{"sender", "attention", "layer", "index", "activation", "all_paths",
//   "paths": [{"receiver", "attention", "layer", "index" (heads), "input", "restored"}...]}...]}
nlohmann::json path_patching_json(const PathPatchingResult& r);

}  // namespace qkv::inspect
