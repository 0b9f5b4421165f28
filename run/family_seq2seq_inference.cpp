// The encoder-decoder family over a loaded run (run/family.hpp's calls of an Inference):
// translate, score pairs, the passes that show the encoder's, the decoder's and the cross
// attention.
#include "run/inference.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <limits>

#include "core/cancel.hpp"
#include "core/parallel.hpp"
#include "data/tokenizer.hpp"
#include "nn/seq2seq.hpp"
#include "run/families.hpp"
#include "run/limits.hpp"

namespace qkv::run {

namespace {

// The split o.split names: valid, test or train of d, or for a parallel corpus any split of its
// folder by name (its configured split names too), loaded into `named`.
const data::Dataset& select_split(const std::string& split, const LoadedRun& r,
                                  const data::DataSplits& d, data::Dataset& named) {
  const data::Dataset* ds = split == "valid"   ? &d.valid
                            : split == "test"  ? &d.test
                            : split == "train" ? &d.train
                                               : nullptr;
  const data::DataConfig& dc = r.config.data;
  const bool parallel = dc.task == data::TaskKind::parallel;
  if (parallel && (!ds || split == dc.valid_split || split == dc.test_split)) {
    if (split == dc.valid_split)
      ds = &d.valid;
    else if (split == dc.test_split)
      ds = &d.test;
    else {
      named = data::load_parallel_split(dc, r.data, split);
      ds = &named;
    }
  }
  QKV_CHECK(ds, "eval", "--split must be valid, test or train",
            parallel ? " or a split of the corpus folder" : "", ", got '", split, "'");
  return *ds;
}

}  // namespace

data::Ids Seq2SeqFamily::encode(const Inference& inf, const std::string& text,
                                const char* op) const {
  const data::Ids src = encode_source(inf.run(), text, inf.run().dir, op);
  const int64_t n = static_cast<int64_t>(src.size());
  QKV_CHECK(n <= inf.max_input_tokens(), op, "the input has ", n, " tokens, more than the model's ",
            inf.max_input_tokens(), " source positions (learned positions, model.max_len)");
  QKV_CHECK(n <= inf.max_input(), op, "the input has ", n, " tokens, more than --max-input ",
            inf.max_input(),
            " (decoding time and memory grow with the square of the input; raise "
            "--max-input to decode it)");
  return src;
}

std::string Seq2SeqFamily::text(const Inference& inf, const data::Ids& ids) const {
  if (!is_symbol_task(inf.run().config.data)) return data::decode_target(inf.run().data, ids);
  const std::vector<std::string> toks = inf.run().data.tgt_vocab.decode(ids);
  std::string shown;
  for (size_t i = 0; i < toks.size(); ++i) shown += (i ? " " : "") + toks[i];
  return shown;
}

std::string Seq2SeqFamily::output_name(const Inference&) const { return "output"; }

std::vector<std::string> Seq2SeqFamily::input_labels(const Inference& inf,
                                                     const data::Ids& ids) const {
  return token_labels(ids, inf.run().data.src_vocab);
}
std::vector<std::string> Seq2SeqFamily::output_labels(const Inference& inf,
                                                      const data::Ids& ids) const {
  return token_labels(ids, inf.run().data.tgt_vocab);
}

std::vector<data::Ids> Seq2SeqFamily::decode(const Inference& inf,
                                             const std::vector<data::Ids>& inputs,
                                             const DecodeOptions& o) const {
  QKV_CHECK(o.beam >= 1, "decode", "beam must be >= 1, got ", o.beam);
  const auto c = inf.call();
  const nn::EncoderDecoder& model = nn::model_as<nn::EncoderDecoder>(inf.model(), "decode");
  const int64_t bs = std::max<int64_t>(1, inf.run().config.data.batch_size);
  std::vector<data::Ids> outs;
  for (size_t at = 0; at < inputs.size(); at += static_cast<size_t>(bs)) {
    const std::vector<data::Ids> srcs(
        inputs.begin() + static_cast<std::ptrdiff_t>(at),
        inputs.begin() + static_cast<std::ptrdiff_t>(std::min(inputs.size(), at + bs)));
    std::vector<int64_t> lens;
    for (const data::Ids& s : srcs)
      lens.push_back(o.max_len > 0 ? o.max_len
                                   : inf.max_output_tokens(static_cast<int64_t>(s.size())));
    std::vector<data::Ids> part =
        o.beam > 1 ? beam_decode(model, srcs, inf.run().data.framing, o.beam, lens, o.alpha)
                   : greedy_decode(model, srcs, inf.run().data.framing, lens);
    for (data::Ids& x : part) outs.push_back(std::move(x));
  }
  return outs;
}

namespace {

// The teacher-forced and exact-match figures of m.
void add_pair_metrics(Scores& s, const Metrics& m) {
  s.metrics = loss_metrics(m.loss, "target token");
  s.metrics.push_back(
      {.key = "token_accuracy", .label = "token accuracy", .value = m.token_accuracy});
  s.metrics.push_back({.key = "exact_match", .label = "exact match", .value = m.exact_match});
  s.json["examples"] = m.examples;
}

// BLEU and chrF of a text task's decodes (made with o.decode in seconds), with their
// signatures and how the decodes were made.
void add_text_metrics(Scores& s, const data::BleuScore& bleu, const data::ChrfScore& chrf,
                      const ScoreOptions& o, int64_t examples, double seconds) {
  s.metrics.push_back({.key = "bleu",
                       .label = "BLEU",
                       .value = bleu.score,
                       .text = {bleu.format(), "  " + bleu.signature}});
  s.metrics.push_back({.key = "chrf",
                       .label = "chrF",
                       .value = chrf.score,
                       .text = {chrf.format(), "  " + chrf.signature}});
  const double per_second = seconds > 0 ? static_cast<double>(examples) / seconds : 0.0;
  s.json["split"] = o.split;
  s.json["bleu_signature"] = bleu.signature;
  s.json["bleu_detail"] = bleu.format();
  s.json["chrf_signature"] = chrf.signature;
  s.json["metrics_implementation"] = data::kMetricsImplementation;
  s.json["decode"] = {{"beam", o.decode.beam},
                      {"alpha", o.decode.alpha},
                      {"seconds", seconds},
                      {"sentences_per_second", per_second},
                      {"threads", get_num_threads()}};
  s.notes.push_back(fmt::format(
      "({}; {} decoding: {:.1f} s, {:.1f} sentences/s, {} threads)", data::kMetricsImplementation,
      o.decode.beam > 1 ? "beam " + std::to_string(o.decode.beam) : std::string("greedy"), seconds,
      per_second, get_num_threads()));
}

}  // namespace

Scores Seq2SeqFamily::score(const Inference& inf, const ScoreOptions& o) const {
  QKV_CHECK(o.min_len == 0 || o.max_len > 0, "eval", "--min-len needs --max-len");
  const int64_t lo = o.min_len > 0 ? o.min_len : std::min(inf.run().config.data.min_len, o.max_len);
  const data::DataSplits regen =
      o.max_len > 0 ? regenerated(inf.run(), lo, o.max_len) : data::DataSplits();
  data::Dataset named;
  const data::Dataset& ds =
      select_split(o.split, inf.run(), o.max_len > 0 ? regen : inf.run().data, named);
  check_evaluable(inf.run().config, inf.run().data.framing, ds);
  const bool text_task = !is_symbol_task(inf.run().config.data);
  QKV_CHECK(text_task || (o.decode.beam == 1 && !o.lowercase && !o.hypotheses), "eval",
            "--beam, --hyp-out and --lowercase are for text tasks (BLEU), not data.task = ",
            name_of(inf.run().config.data.task));
  // Greedy BLEU scores the decodes exact match made (the same rule decodes both): one pass.
  const bool once = text_task && o.decode.beam == 1;
  Metrics m;
  {
    const auto c = inf.call();
    m = evaluate(nn::model_as<nn::EncoderDecoder>(inf.model(), "eval"), ds, inf.run().data.framing,
                 inf.run().config.data.batch_size,
                 scored_length(inf.run().config, inf.run().data.framing), 0,
                 once ? &inf.run().data : nullptr);
  }
  Scores s;
  s.summary = examples_summary(m.examples, lo, o.max_len);
  add_pair_metrics(s, m);
  // a regenerated split: its lengths and target tokens (with <eos>)
  if (o.max_len > 0)
    s.json["min_len"] = lo, s.json["max_len"] = o.max_len, s.json["tokens"] = m.tokens;
  if (!text_task) return s;
  double seconds = m.decode_seconds;
  if (once) {
    s.hypotheses = std::move(m.hypotheses);
  } else {
    std::vector<data::Ids> srcs;
    for (const auto& e : ds.examples) srcs.push_back(e.src);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<data::Ids> outs = decode(inf, srcs, o.decode);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const data::Ids& out : outs)
      s.hypotheses.push_back(data::decode_target(inf.run().data, out));
  }
  std::vector<std::string> refs;
  for (const auto& p : ds.text) refs.push_back(p.tgt);
  add_text_metrics(s, data::corpus_bleu(s.hypotheses, refs, o.lowercase),
                   data::corpus_chrf(s.hypotheses, refs, o.lowercase), o, ds.size(), seconds);
  return s;
}

void Seq2SeqFamily::for_each_batch(const Inference& inf, const PassOptions& o,
                                   const std::function<void(const BatchPass&)>& fn) const {
  data::Dataset named;
  const data::Dataset& ds = select_split(o.split, inf.run(), inf.run().data, named);
  QKV_CHECK(ds.size() > 0, "inference", "the ", o.split, " split is empty");
  check_evaluable(inf.run().config, inf.run().data.framing, ds);
  const int64_t batch = std::max<int64_t>(1, inf.run().config.data.batch_size);
  const auto c = inf.call(o.record, o.hooks);
  int64_t done = 0;
  for (int64_t at = 0; at < ds.size(); at += batch) {  // evaluate()'s batches, in its order
    if (o.max_batches > 0 && done++ == o.max_batches) break;
    cancellation_point();
    std::vector<int64_t> idx;
    for (int64_t i = at; i < std::min(ds.size(), at + batch); ++i) idx.push_back(i);
    const data::Batch b = data::make_batch(ds, idx, inf.run().data.framing);
    const ag::Var logits = inf.model().forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
    BatchPass p;
    p.loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(), 0);
    p.tokens = b.tgt_tokens;
    p.input_valid = b.src_mask;
    p.output_valid = b.tgt_mask;
    fn(p);
  }
}

int64_t Seq2SeqFamily::pass_tokens(const Inference& inf, const PassOptions& o) const {
  data::Dataset named;
  const data::Dataset& ds = select_split(o.split, inf.run(), inf.run().data, named);
  const int64_t batch = std::max<int64_t>(1, inf.run().config.data.batch_size);
  int64_t tokens = 0, done = 0;
  for (int64_t at = 0; at < ds.size(); at += batch) {  // for_each_batch's batches
    if (o.max_batches > 0 && done++ == o.max_batches) break;
    int64_t src = 0, tgt = 0;
    for (int64_t i = at; i < std::min(ds.size(), at + batch); ++i) {
      const data::Example& e = ds.examples[static_cast<size_t>(i)];
      src = std::max(src, static_cast<int64_t>(e.src.size()));
      tgt = std::max(tgt, inf.run().data.framing.target_len(static_cast<int64_t>(e.tgt.size())));
    }
    tokens += (std::min(ds.size(), at + batch) - at) * (src + tgt);
  }
  return tokens;
}

Tensor Seq2SeqFamily::logits(const Inference& inf, const data::Ids& src, const data::Ids& tgt_in,
                             nn::Hooks* hooks) const {
  QKV_CHECK(!src.empty() && !tgt_in.empty(), "logits", "an empty source or decoder input");
  const Tensor sv = ones({1, static_cast<int64_t>(src.size())}, DType::b8);
  const Tensor tv = ones({1, static_cast<int64_t>(tgt_in.size())}, DType::b8);
  const auto c = inf.call(false, hooks);
  return inf.model()
      .forward(row_of(src), row_of(tgt_in), sv, tv)
      .data()
      .select(0, 0)
      .to(DType::f32);
}

Tensor Seq2SeqFamily::batch_logits(const Inference& inf, const Tensor& src, const Tensor& tgt_in,
                                   nn::Hooks* hooks, const Tensor& src_valid,
                                   const Tensor& tgt_valid) const {
  // Within the model's positions, and the longest input encode accepts (OpenOptions::max_input)
  const int64_t longest = std::min(inf.max_input_tokens(), inf.max_input());
  check_batch_ids(src, longest, "input");
  check_batch_ids(tgt_in, longest, "decoder input");
  QKV_CHECK(tgt_in.size(0) == src.size(0), "forward", "the decoder input ", tgt_in.shape(),
            " has another batch size than the input ", src.shape());
  check_batch_valid(src_valid, src, "input");
  check_batch_valid(tgt_valid, tgt_in, "decoder input");
  const auto c = inf.call(false, hooks);
  const Tensor s = src.contiguous(), t = tgt_in.contiguous();
  return inf.model()
      .forward(s, t, valid_or_all(src_valid, s), valid_or_all(tgt_valid, t))
      .data()
      .to(DType::f32)
      .contiguous();
}

}  // namespace qkv::run
