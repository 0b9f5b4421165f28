// The decoder-only language model's family over a loaded run (run/family.hpp's calls of an
// Inference): sample, score a token stream, the pass that shows the causal self-attention.
#include "run/inference.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <limits>

#include "core/cancel.hpp"
#include "data/lm.hpp"
#include "nn/decoder_lm.hpp"
#include "run/families.hpp"

namespace qkv::run {

data::Ids LanguageModelFamily::encode(const Inference& inf, const std::string& text,
                                      const char* op) const {
  const data::Ids ids = data::encode_lm_text(
      text, inf.run().data.tgt_vocab, inf.run().data.tgt_spm.get(), cat(op, ": the text").c_str());
  QKV_CHECK(!ids.empty(), op, "the text is empty");
  const int64_t context = inf.max_input_tokens();
  QKV_CHECK(static_cast<int64_t>(ids.size()) <= context, op, "the text has ", ids.size(),
            inf.run().data.tgt_spm ? " pieces" : " characters",
            ", more than the model's context of ", context, " (",
            nn::model_as<nn::DecoderLM>(inf.model(), op).max_positions() <
                    inf.run().config.data.block_size
                ? "learned positions, model.max_len"
                : "data.block_size",
            ")");
  return ids;
}

std::string LanguageModelFamily::text(const Inference& inf, const data::Ids& ids) const {
  data::LmDetokenizer text(inf.run().data.tgt_vocab, inf.run().data.tgt_spm != nullptr);
  std::string shown;
  for (const int64_t id : ids) shown += text.next(id);
  return shown;
}

std::vector<std::string> LanguageModelFamily::input_labels(const Inference& inf,
                                                           const data::Ids& ids) const {
  return token_labels(ids, inf.run().data.tgt_vocab);
}
std::vector<std::string> LanguageModelFamily::output_labels(const Inference& inf,
                                                            const data::Ids& ids) const {
  return token_labels(ids, inf.run().data.tgt_vocab);
}

std::string LanguageModelFamily::output_name(const Inference& inf) const {
  return inf.run().data.tgt_spm ? "next-piece guesses" : "next-character guesses";
}

void LanguageModelFamily::generate(const Inference& inf, const data::Ids& prompt, int64_t n,
                                   const SampleOptions& o, Generator& gen, bool cached,
                                   const std::function<void(int64_t)>& on_token) const {
  const auto c = inf.call();
  run::generate(nn::model_as<nn::DecoderLM>(inf.model(), "generate"), prompt, n,
                inf.max_input_tokens(), o, gen, cached, on_token);
}

Scores LanguageModelFamily::score(const Inference& inf, const ScoreOptions& o) const {
  QKV_CHECK(o.max_len == 0 && o.min_len == 0, "eval",
            "--max-len / --min-len regenerate synthetic tasks; a language model has none");
  QKV_CHECK(o.decode.beam == 1 && !o.lowercase && !o.hypotheses, "eval",
            "--beam, --hyp-out and --lowercase are for text tasks (BLEU), not a language model");
  QKV_CHECK(o.split == "valid" || o.split == "train", "eval",
            "--split must be valid or train for a language model (the first 90% trains, the "
            "last 10% validates), got '",
            o.split, "'");
  const data::DataSplits& d = inf.full_data("eval");
  const auto c = inf.call();
  const LmLoss m = lm_loss_full(nn::model_as<nn::DecoderLM>(inf.model(), "eval"),
                                o.split == "valid" ? d.lm_valid : d.lm_train,
                                inf.run().config.data.block_size, inf.run().config.data.batch_size);
  // A character token is one Unicode code point of the text (line breaks included): its bits
  // per token are bits per character. A SentencePiece piece has no such reading.
  const bool per_character = !d.tgt_spm;
  const std::string unit = per_character ? "character" : "piece";
  const int64_t block = inf.run().config.data.block_size;
  Scores s;
  s.summary = fmt::format(": {} {}s in {} windows of {}", m.tokens, unit, m.windows, block);
  s.metrics = loss_metrics(m.loss, unit);
  if (per_character)
    s.metrics.push_back(
        {.key = "bits_per_char", .label = "bits per char", .value = bits_per_token(m.loss)});
  s.json = {{"tokens", m.tokens}, {"windows", m.windows}, {"block_size", block}};
  return s;
}

void LanguageModelFamily::for_each_batch(const Inference& inf, const PassOptions& o,
                                         const std::function<void(const BatchPass&)>& fn) const {
  QKV_CHECK(o.split == "valid" || o.split == "train", "inference",
            "--split must be valid or train for a language model, got '", o.split, "'");
  const data::DataSplits& d = inf.full_data("inference");
  const data::Ids& tokens = o.split == "valid" ? d.lm_valid : d.lm_train;
  const int64_t block = inf.run().config.data.block_size;
  const auto batch = static_cast<size_t>(std::max<int64_t>(1, inf.run().config.data.batch_size));
  std::vector<int64_t> offsets;  // the windows of lm_loss_full, in its order
  for (int64_t at = 0; at + block < static_cast<int64_t>(tokens.size()); at += block)
    offsets.push_back(at);
  QKV_CHECK(!offsets.empty(), "inference", "the ", o.split, " text is shorter than one window of ",
            block + 1, " tokens");
  const auto c = inf.call(o.record, o.hooks);
  int64_t done = 0;
  for (size_t at = 0; at < offsets.size(); at += batch) {
    if (o.max_batches > 0 && done++ == o.max_batches) break;
    cancellation_point();
    const std::vector<int64_t> part(
        offsets.begin() + static_cast<std::ptrdiff_t>(at),
        offsets.begin() + static_cast<std::ptrdiff_t>(std::min(offsets.size(), at + batch)));
    const data::Batch b = data::lm_batch(tokens, part, block);
    const ag::Var logits = nn::model_as<nn::DecoderLM>(inf.model(), "inference").forward(b.tgt_in);
    BatchPass p;
    p.loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(), -1);
    p.tokens = b.tgt_tokens;
    p.output_valid = ones(b.tgt_in.shape(), DType::b8);
    fn(p);
  }
}

int64_t LanguageModelFamily::pass_tokens(const Inference& inf, const PassOptions& o) const {
  QKV_CHECK(o.split == "valid" || o.split == "train", "inference",
            "--split must be valid or train for a language model, got '", o.split, "'");
  const data::DataSplits& d = inf.full_data("inference");
  const int64_t n = static_cast<int64_t>((o.split == "valid" ? d.lm_valid : d.lm_train).size());
  const int64_t block = inf.run().config.data.block_size;
  const int64_t batch = std::max<int64_t>(1, inf.run().config.data.batch_size);
  int64_t windows = n > block ? (n - block - 1) / block + 1 : 0;  // for_each_batch's offsets
  if (o.max_batches > 0) windows = std::min(windows, o.max_batches * batch);
  return windows * block;
}

Tensor LanguageModelFamily::logits(const Inference& inf, const data::Ids& input, const data::Ids&,
                                   nn::Hooks* hooks) const {
  QKV_CHECK(!input.empty() && static_cast<int64_t>(input.size()) <= inf.max_input_tokens(),
            "logits", "the text has ", input.size(), " tokens; the model reads 1 to ",
            inf.max_input_tokens());
  const auto c = inf.call(false, hooks);
  return nn::model_as<nn::DecoderLM>(inf.model(), "logits")
      .forward(row_of(input))
      .data()
      .select(0, 0)
      .to(DType::f32);  // (T, V)
}

Tensor LanguageModelFamily::batch_logits(const Inference& inf, const Tensor& input, const Tensor&,
                                         nn::Hooks* hooks, const Tensor& input_valid,
                                         const Tensor&) const {
  check_batch_ids(input, std::min(inf.max_input_tokens(), inf.max_input()), "input");
  check_batch_valid(input_valid, input, "input");
  const auto c = inf.call(false, hooks);
  const Tensor valid = input_valid.defined() ? input_valid.contiguous() : Tensor();
  return nn::model_as<nn::DecoderLM>(inf.model(), "forward")
      .forward(input.contiguous(), valid)
      .data()
      .to(DType::f32)
      .contiguous();
}

}  // namespace qkv::run
