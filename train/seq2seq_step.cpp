#include "train/seq2seq_step.hpp"

#include "autograd/ops.hpp"
#include "nn/hooks.hpp"

namespace qkv::train {

Seq2SeqStep::Seq2SeqStep(const nn::Model& model, data::BatchSource& loader, Seq2SeqLoss options)
    : model_(model), loader_(loader), options_(options), sites_(model.attention_sites()) {}

ag::Var Seq2SeqStep::loss_keeping_patterns(const data::Batch& b) {
  nn::Hooks hooks;
  hooks.capture = nn::names_matching({"*.pattern"});
  ag::Var loss;
  {
    const nn::HookScope scope(hooks);
    loss = model_.forward_loss(b.src, b.tgt_in, b.src_mask, b.tgt_mask, b.tgt_out,
                               options_.ignore_index, options_.label_smoothing);
  }
  // Site by site, layer by layer; detached, so the second scorer pass that formed them is freed
  // now rather than with the next step.
  for (SitePatterns& group : patterns_)
    for (int64_t l = 0; l < group.site.layers; ++l)
      if (const auto it = hooks.cache.find(group.site.pattern(l)); it != hooks.cache.end())
        group.layers.push_back(it->second.detach());
  return loss;
}

Forward Seq2SeqStep::operator()() {
  batch_ = loader_.next();
  // Every site's group, empty until the pass fills it (a data-parallel rank with an empty
  // shard keeps them empty, so every rank combines the same sites).
  patterns_.clear();
  if (options_.keep_attention)
    for (const nn::AttentionSite& site : sites_) patterns_.push_back({site, {}});
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
