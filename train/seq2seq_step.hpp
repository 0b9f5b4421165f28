// The forward of a qkv::nn::Model (Seq2Seq or DecoderLM) for the Trainer: draws
// the next batch from a data::BatchSource and returns its token-mean cross-entropy.
//
//   logits (B, T, V) = model.forward(src (B, S), tgt_in (B, T), src_mask, tgt_mask)
//   loss = cross_entropy(logits as (B*T, V), tgt_out as (B*T), ignore_index, label_smoothing)
// as model.forward_loss computes it (in a bf16 step without the logits tensor).
// With keep_attention the step's attention weights are captured at the hook points "*.pattern"
// (nn/hooks.hpp): the loss stays the fused one and its bits stay those of a step without them.
// A shard of a data-parallel batch (Batch::global_tgt_tokens > tgt_tokens) scales its loss by
// tgt_tokens / global_tgt_tokens, so the processes' losses and gradients sum to those of the
// global batch; a shard with no rows returns an undefined loss.
//
// The model and the loader are the caller's and must outlive this object.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.hpp"
#include "nn/model.hpp"
#include "train/trainer.hpp"

namespace qkv::train {

struct Seq2SeqLoss {
  int64_t ignore_index = 0;  // label 0 is <pad>; -1 for vocabularies without specials (lm)
  double label_smoothing = 0;
  bool keep_attention = false;  // keep each step's attention weights (attention_patterns())
};

// One step's attention weights of one attention site (nn/attention_site.hpp): each layer's
// (B, h, n, m), off the tape.
struct SitePatterns {
  nn::AttentionSite site;
  std::vector<ag::Var> layers;
};
// Every site's, in the model's (forward) order.
using AttentionPatterns = std::vector<SitePatterns>;

class Seq2SeqStep {
 public:
  Seq2SeqStep(const nn::Model& model, data::BatchSource& loader, Seq2SeqLoss options = {});
  Forward operator()();
  // For Trainer: a ForwardFn calling this object (which must outlive it).
  ForwardFn forward_fn() {
    return [this] { return (*this)(); };
  }
  const data::Batch& batch() const { return batch_; }  // the last step's batch
  // The last step's, with keep_attention: a group per site (each empty for an empty shard);
  // no groups without keep_attention.
  const AttentionPatterns& attention_patterns() const { return patterns_; }

 private:
  // forward_loss with every "*.pattern" hook point captured into patterns_.
  ag::Var loss_keeping_patterns(const data::Batch& b);

  const nn::Model& model_;
  data::BatchSource& loader_;
  Seq2SeqLoss options_;
  data::Batch batch_;
  std::vector<nn::AttentionSite> sites_;  // the model's, whose patterns keep_attention keeps
  AttentionPatterns patterns_;
};

}  // namespace qkv::train
