// The decoder-only language model's inference (run/inference.hpp): sample, score a token
// stream, show the causal self-attention over a text.
#include "run/inference_families.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <limits>

#include "core/cancel.hpp"
#include "data/lm.hpp"
#include "run/families.hpp"

namespace qkv::run {

data::Ids LanguageModelInference::encode(const std::string& text, const char* op) const {
  const data::Ids ids = data::encode_lm_text(text, run_.data.tgt_vocab, run_.data.tgt_spm.get(),
                                             cat(op, ": the text").c_str());
  QKV_CHECK(!ids.empty(), op, "the text is empty");
  const int64_t context = max_input_tokens();
  QKV_CHECK(static_cast<int64_t>(ids.size()) <= context, op, "the text has ", ids.size(),
            run_.data.tgt_spm ? " pieces" : " characters", ", more than the model's context of ",
            context, " (",
            lm(op).max_positions() < run_.config.data.block_size
                ? "learned positions, model.max_len"
                : "data.block_size",
            ")");
  return ids;
}

std::string LanguageModelInference::text(const data::Ids& ids) const {
  data::LmDetokenizer text(run_.data.tgt_vocab, run_.data.tgt_spm != nullptr);
  std::string shown;
  for (const int64_t id : ids) shown += text.next(id);
  return shown;
}

std::vector<std::string> LanguageModelInference::input_labels(const data::Ids& ids) const {
  return token_labels(ids, run_.data.tgt_vocab);
}
std::vector<std::string> LanguageModelInference::output_labels(const data::Ids& ids) const {
  return token_labels(ids, run_.data.tgt_vocab);
}

std::string LanguageModelInference::output_name() const {
  return run_.data.tgt_spm ? "next-piece guesses" : "next-character guesses";
}

void LanguageModelInference::generate(const data::Ids& prompt, int64_t n, const SampleOptions& o,
                                      Generator& gen, bool cached,
                                      const std::function<void(int64_t)>& on_token) const {
  const auto c = call();
  run::generate(lm("generate"), prompt, n, max_input_tokens(), o, gen, cached, on_token);
}

Scores LanguageModelInference::score(const ScoreOptions& o) const {
  QKV_CHECK(o.max_len == 0 && o.min_len == 0, "eval",
            "--max-len / --min-len regenerate synthetic tasks; a language model has none");
  QKV_CHECK(o.decode.beam == 1 && !o.lowercase && !o.hypotheses, "eval",
            "--beam, --hyp-out and --lowercase are for text tasks (BLEU), not a language model");
  QKV_CHECK(o.split == "valid" || o.split == "train", "eval",
            "--split must be valid or train for a language model (the first 90% trains, the "
            "last 10% validates), got '",
            o.split, "'");
  const data::DataSplits d = data::load_data(run_.config.data);
  QKV_CHECK(d.tgt_vocab == run_.data.tgt_vocab, "eval", run_.dir,
            ": the text's vocabulary differs from the run's; the data changed since training");
  const auto c = call();
  const LmLoss m = lm_loss_full(lm("eval"), o.split == "valid" ? d.lm_valid : d.lm_train,
                                run_.config.data.block_size, run_.config.data.batch_size);
  // A character token is one Unicode code point of the text (line breaks included): its bits
  // per token are bits per character. A SentencePiece piece has no such reading.
  const bool per_character = !d.tgt_spm;
  const std::string unit = per_character ? "character" : "piece";
  const int64_t block = run_.config.data.block_size;
  Scores s;
  s.summary = fmt::format(": {} {}s in {} windows of {}", m.tokens, unit, m.windows, block);
  s.metrics = loss_metrics(m.loss, unit);
  if (per_character)
    s.metrics.push_back(
        {.key = "bits_per_char", .label = "bits per char", .value = bits_per_token(m.loss)});
  s.json = {{"tokens", m.tokens}, {"windows", m.windows}, {"block_size", block}};
  return s;
}

const data::DataSplits& LanguageModelInference::stream(const char* op) const {
  std::lock_guard<std::mutex> lock(stream_mu_);
  if (!stream_) {
    auto d = std::make_shared<data::DataSplits>(data::load_data(run_.config.data));
    QKV_CHECK(d->tgt_vocab == run_.data.tgt_vocab, op, run_.dir,
              ": the text's vocabulary differs from the run's; the data changed since training");
    stream_ = std::move(d);
  }
  return *stream_;
}

void LanguageModelInference::for_each_batch(const PassOptions& o,
                                            const std::function<void(const BatchPass&)>& fn) const {
  QKV_CHECK(o.split == "valid" || o.split == "train", "inference",
            "--split must be valid or train for a language model, got '", o.split, "'");
  const data::DataSplits& d = stream("inference");
  const data::Ids& tokens = o.split == "valid" ? d.lm_valid : d.lm_train;
  const int64_t block = run_.config.data.block_size;
  const auto batch = static_cast<size_t>(std::max<int64_t>(1, run_.config.data.batch_size));
  std::vector<int64_t> offsets;  // the windows of lm_loss_full, in its order
  for (int64_t at = 0; at + block < static_cast<int64_t>(tokens.size()); at += block)
    offsets.push_back(at);
  QKV_CHECK(!offsets.empty(), "inference", "the ", o.split, " text is shorter than one window of ",
            block + 1, " tokens");
  const auto c = call(o.record, o.hooks);
  int64_t done = 0;
  for (size_t at = 0; at < offsets.size(); at += batch) {
    if (o.max_batches > 0 && done++ == o.max_batches) break;
    cancellation_point();
    const std::vector<int64_t> part(
        offsets.begin() + static_cast<std::ptrdiff_t>(at),
        offsets.begin() + static_cast<std::ptrdiff_t>(std::min(offsets.size(), at + batch)));
    const data::Batch b = data::lm_batch(tokens, part, block);
    const ag::Var logits = lm("inference").forward(b.tgt_in);
    BatchPass p;
    p.loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(), -1);
    p.tokens = b.tgt_tokens;
    p.output_valid = ones(b.tgt_in.shape(), DType::b8);
    fn(p);
  }
}

int64_t LanguageModelInference::pass_tokens(const PassOptions& o) const {
  QKV_CHECK(o.split == "valid" || o.split == "train", "inference",
            "--split must be valid or train for a language model, got '", o.split, "'");
  const data::DataSplits& d = stream("inference");
  const int64_t n = static_cast<int64_t>((o.split == "valid" ? d.lm_valid : d.lm_train).size());
  const int64_t block = run_.config.data.block_size;
  const int64_t batch = std::max<int64_t>(1, run_.config.data.batch_size);
  int64_t windows = n > block ? (n - block - 1) / block + 1 : 0;  // for_each_batch's offsets
  if (o.max_batches > 0) windows = std::min(windows, o.max_batches * batch);
  return windows * block;
}

Tensor LanguageModelInference::logits(const data::Ids& input, const data::Ids&,
                                      nn::Hooks* hooks) const {
  QKV_CHECK(!input.empty() && static_cast<int64_t>(input.size()) <= max_input_tokens(), "logits",
            "the text has ", input.size(), " tokens; the model reads 1 to ", max_input_tokens());
  const auto c = call(false, hooks);
  return lm("logits").forward(row_of(input)).data().select(0, 0).to(DType::f32);  // (T, V)
}

Tensor LanguageModelInference::batch_logits(const Tensor& input, const Tensor&, nn::Hooks* hooks,
                                            const Tensor& input_valid, const Tensor&) const {
  check_batch_ids(input, std::min(max_input_tokens(), max_input_), "input");
  check_batch_valid(input_valid, input, "input");
  const auto c = call(false, hooks);
  const Tensor valid = input_valid.defined() ? input_valid.contiguous() : Tensor();
  return lm("forward").forward(input.contiguous(), valid).data().to(DType::f32).contiguous();
}

Inspection LanguageModelInference::inspect(const data::Ids& ids) const {
  QKV_CHECK(!ids.empty(), "attention", "the text is empty");
  QKV_CHECK(static_cast<int64_t>(ids.size()) <= max_input_tokens(), "attention", "the text has ",
            ids.size(), " tokens, more than the model's context of ", max_input_tokens());
  const auto c = call();
  return run_.family().inspect(*run_.model, run_.config, run_.data, ids);
}

}  // namespace qkv::run
