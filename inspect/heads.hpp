// Heads by name, and hooks that remove them: what `--ablate`, `qkv heads` and `qkv patch` act
// on. A head is one layer and head of an attention site (nn/attention_site.hpp), named as
// TransformerLens counts them (from 0): the site's head prefix, then L.H --
//
//   a model of one site (a language model, an encoder classifier)   L.H   e.g. 1.3
//   (blocks.1.attn.z) an encoder-decoder        encoder.L.H  decoder.L.H  cross.L.H   its three
//   sites
//
// (`qkv attention --layer/--head` count from 1, as its figure titles do.) A head's output is its
// slice of the hook point z (B, h, n, d_head) before the output projection W_O; removing it
// zeroes that slice (zero-ablation) or replaces it by its mean over a split's real positions
// (mean-ablation), Michel, Levy and Neubig 2019 ("Are Sixteen Heads Really Better than One?").
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/attention_site.hpp"
#include "nn/hooks.hpp"

namespace qkv::nn {
class Model;
}
namespace qkv::run {
class Inference;
}

namespace qkv::inspect {

// One attention of a model, every layer of it: the model's own site (nn/attention_site.hpp).
using Attention = nn::AttentionSite;

// The model's attention sites, in forward order (nn::Model::attention_sites: from its structure,
// no pass). heads: what the caller expects per layer, checked (qkv::Error when they differ).
std::vector<Attention> attentions_of(const nn::Model& model, int64_t heads);
// Of a trained run.
std::vector<Attention> attentions_of(const run::Inference& inf);

struct HeadRef {
  Attention attention;
  int64_t layer = 0, head = 0;
  std::string name() const { return attention.head_name(layer, head); }
};

// Comma-separated head names ("0.1,1.3" or "cross.1.0,encoder.0.2"); empty: none. An unknown
// attention, layer or head throws qkv::Error naming op, the nearest valid head and the ranges;
// an empty name (',', a leading, trailing or doubled comma) "an empty head name in '...'".
// The same head twice counts once.
std::vector<HeadRef> parse_heads(const std::string& spec, const std::vector<Attention>& attentions,
                                 const char* op);

// Hooks that multiply the heads' z by 0 (zero-ablation): one replacement per z hook point,
// after any already there.
void add_zero_ablation(nn::Hooks& hooks, const std::vector<HeadRef>& heads);

// Each head's mean z over real query positions: z hook point -> (1, h, 1, d_head) float32.
using MeanZ = std::map<std::string, Tensor>;
// The mean of every attention's z over a split (at most max_batches; 0: all), under the
// calling thread's hooks.
MeanZ mean_z(const run::Inference& inf, const std::vector<Attention>& attentions,
             const std::string& split, int64_t max_batches);
// Hooks that replace the heads' z by their mean (mean-ablation).
void add_mean_ablation(nn::Hooks& hooks, const std::vector<HeadRef>& heads, const MeanZ& means);

// --ablate SPEC of a command: the heads of spec (of inf's model) zero-ablated in every pass this
// thread runs while the object lives -- a HookScope (nn/hooks.hpp), so the Inference's calls
// honour it and the hooks they add (a capture, a patch, a mask) compose inside it. An empty
// spec installs nothing: the calls compute the same bits as without --ablate. Create it on the
// thread that makes the calls.
class Ablation {
 public:
  Ablation(const run::Inference& inf, const std::string& spec, const char* op);
  const std::vector<HeadRef>& heads() const { return heads_; }

 private:
  std::vector<HeadRef> heads_;
  nn::Hooks hooks_;
  std::optional<nn::HookScope> scope_;  // ends before hooks_
};

// Scales every head of an attention layer by a mask variable: z -> z * xi, xi (1, h, 1, 1)
// all ones in z's dtype, requiring grad. dL/dxi_h is head h's importance on that batch.
// Returns the variables, by z hook point.
std::map<std::string, ag::Var> add_head_masks(nn::Hooks& hooks,
                                              const std::vector<Attention>& attentions,
                                              DType dtype = DType::f32);

}  // namespace qkv::inspect
