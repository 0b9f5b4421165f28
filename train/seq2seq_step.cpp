#include "train/seq2seq_step.hpp"

#include "autograd/ops.hpp"
#include "nn/hooks.hpp"

namespace qkv::train {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

Seq2SeqStep::Seq2SeqStep(const nn::Model& model, data::BatchSource& loader, Seq2SeqLoss options)
    : model_(model), loader_(loader), options_(options) {
  for (const std::string& p : nn::hook_points(model))
    if (ends_with(p, ".pattern")) pattern_points_.push_back(p);
}

ag::Var Seq2SeqStep::loss_keeping_patterns(const data::Batch& b) {
  nn::Hooks hooks;
  hooks.capture = nn::names_matching({"*.pattern"});
  ag::Var loss;
  {
    const nn::HookScope scope(hooks);
    loss = model_.forward_loss(b.src, b.tgt_in, b.src_mask, b.tgt_mask, b.tgt_out,
                               options_.ignore_index, options_.label_smoothing);
  }
  // In the hook points' (forward) order, so layer by layer; detached, so the second scorer
  // pass that formed them is freed now rather than with the next step.
  for (const std::string& p : pattern_points_) {
    const auto it = hooks.cache.find(p);
    if (it == hooks.cache.end()) continue;
    std::vector<ag::Var>& group = ends_with(p, ".cross.pattern") ? patterns_.decoder_cross
                                  : p.rfind("encoder.", 0) == 0  ? patterns_.encoder_self
                                                                 : patterns_.decoder_self;
    group.push_back(it->second.detach());
  }
  return loss;
}

Forward Seq2SeqStep::operator()() {
  batch_ = loader_.next();
  patterns_ = AttentionPatterns();
  const data::Batch& b = batch_;
  Forward f;
  f.tokens = b.global_src_tokens + b.global_tgt_tokens;
  f.loss_tokens = b.global_tgt_tokens;  // the loss is a mean over these (train.grad_accum)
  if (b.size() == 0) return f;          // data-parallel: a shard of a small last batch may be empty
  f.loss = options_.keep_attention
               ? loss_keeping_patterns(b)
               : model_.forward_loss(b.src, b.tgt_in, b.src_mask, b.tgt_mask, b.tgt_out,
                                     options_.ignore_index, options_.label_smoothing);
  // data-parallel: (sum of this shard's token losses) / (global tokens)
  if (b.tgt_tokens != b.global_tgt_tokens)
    f.loss =
        f.loss * (static_cast<double>(b.tgt_tokens) / static_cast<double>(b.global_tgt_tokens));
  return f;
}

}  // namespace qkv::train
