#include "train/seq2seq_step.hpp"

#include "autograd/ops.hpp"

namespace qkv::train {

Seq2SeqStep::Seq2SeqStep(const nn::Model& model, data::BatchSource& loader, Seq2SeqLoss options)
    : model_(model), loader_(loader), options_(options) {}

Forward Seq2SeqStep::operator()() {
  batch_ = loader_.next();
  maps_ = nn::AttentionMaps();
  const data::Batch& b = batch_;
  Forward f;
  f.tokens = b.global_src_tokens + b.global_tgt_tokens;
  f.loss_tokens = b.global_tgt_tokens;  // the loss is a mean over these (train.grad_accum)
  if (b.size() == 0) return f;          // data-parallel: a shard of a small last batch may be empty
  f.loss =
      model_.forward_loss(b.src, b.tgt_in, b.src_mask, b.tgt_mask, b.tgt_out, options_.ignore_index,
                          options_.label_smoothing, options_.keep_attention ? &maps_ : nullptr);
  // data-parallel: (sum of this shard's token losses) / (global tokens)
  if (b.tgt_tokens != b.global_tgt_tokens)
    f.loss =
        f.loss * (static_cast<double>(b.tgt_tokens) / static_cast<double>(b.global_tgt_tokens));
  return f;
}

}  // namespace qkv::train
