// qkv eval DIR [--split valid|test|train|NAME] [--json] [--max-len N [--min-len N]]
//               [--beam K] [--hyp-out FILE] [--lowercase]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "data/metrics.hpp"

#include "apps/commands.hpp"
#include "core/parallel.hpp"
#include "run/limits.hpp"
#include "run/lm.hpp"
#include "run/provenance.hpp"
#include "run/run.hpp"

namespace qkv::app {
namespace {

// Length generalisation: the run's synthetic task again, with lengths in [min_len, max_len]
// and the same seeds, so only the lengths change. Text tasks (tsv, dates) have no length knob.
void regenerate(run::LoadedRun& r, int64_t min_len, int64_t max_len) {
  data::DataConfig c = r.config.data;
  if (!data::has_length_range(c.task))  // annotated_copy is synthetic too, of one fixed length
    throw Error("eval --max-len: data.task = '" + std::string(name_of(c.task)) +
                "' cannot be regenerated at other lengths (only copy, reverse and sort)");
  if (min_len > max_len)
    throw Error("eval: --min-len " + std::to_string(min_len) + " is above --max-len " +
                std::to_string(max_len));
  c.min_len = min_len;
  c.max_len = max_len;
  data::DataSplits d = data::load_data(c);
  r.data.train = std::move(d.train);
  r.data.valid = std::move(d.valid);
  r.data.test = std::move(d.test);
}

// Learned positions end at model.max_len: say so, naming the key, instead of failing mid-way.
// (Up to model.max_len the table has rows, trained or not: those are evaluated.)
void check_learned(const run::LoadedRun& r, const data::Dataset& ds) {
  if (r.config.model.position != nn::PositionKind::learned) return;
  int64_t need = 0;
  for (const auto& e : ds.examples) {
    const int64_t src = static_cast<int64_t>(e.src.size()),
                  tgt = static_cast<int64_t>(e.tgt.size());
    need = std::max({need, src, r.data.framing.target_len(tgt)});
    if (r.data.framing.eos >= 0)
      need = std::max(need, std::max(src, tgt) + r.config.train.max_decode_extra);
  }
  if (need > r.config.model.max_len)
    throw Error("model.max_len: learned positions cover " + std::to_string(r.config.model.max_len) +
                " tokens, but evaluating " + ds.name + " needs " + std::to_string(need) +
                " (with <eos> and train.max_decode_extra): learned positions cannot go further");
}

// A language model: the exact loss over the whole split (run/lm.hpp, lm_loss_full).
int eval_lm(const EvalArgs& a, const run::LoadedRun& r) {
  QKV_CHECK(a.max_len == 0 && a.min_len == 0, "eval",
            "--max-len / --min-len regenerate synthetic"
            " tasks; a language model has none");
  QKV_CHECK(a.split == "valid" || a.split == "train", "eval",
            "--split must be valid or train for"
            " a language model (the first 90% trains, the last 10% validates), got '",
            a.split, "'");
  const data::DataSplits d = data::load_data(r.config.data);
  QKV_CHECK(d.tgt_vocab == r.data.tgt_vocab, "eval", a.run_dir,
            ": the text's vocabulary differs from the run's; the data changed since training");
  const int64_t block = r.config.data.block_size;
  const run::LmLoss m = run::lm_loss_full(
      r.lm("eval"), a.split == "valid" ? d.lm_valid : d.lm_train, block, r.config.data.batch_size);
  // A character token is one Unicode code point of the text (line breaks included): its bits
  // per token are bits per character. A SentencePiece piece has no such reading.
  const bool chars = !d.tgt_spm;
  if (a.json) {
    nlohmann::json j = {{"loss", m.loss},
                        {"perplexity", run::perplexity(m.loss)},
                        {"tokens", m.tokens},
                        {"windows", m.windows},
                        {"block_size", block}};
    if (chars) j["bits_per_char"] = run::bits_per_token(m.loss);
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s (%s, %s split: %lld %s in %lld windows of %lld)\n", a.run_dir.c_str(),
                r.checkpoint.c_str(), a.split.c_str(), static_cast<long long>(m.tokens),
                chars ? "characters" : "pieces", static_cast<long long>(m.windows),
                static_cast<long long>(block));
    std::printf("  loss            %.4f\n  perplexity      %.4f (per %s)\n", m.loss,
                run::perplexity(m.loss), chars ? "character" : "piece");
    if (chars) std::printf("  bits per char   %.4f\n", run::bits_per_token(m.loss));
  }
  return 0;
}

// Text tasks: every source of ds decoded (beam 1: greedy, in batches), detokenized; the
// decoding alone is timed. Outputs stop at source length + train.max_decode_extra.
struct Decoded {
  std::vector<std::string> hyps;
  double seconds = 0;
};
Decoded decode_all(const run::LoadedRun& r, const data::Dataset& ds, int beam, double alpha) {
  const int64_t extra = r.config.train.max_decode_extra;
  Decoded d;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<data::Ids> outs;
  const int64_t bs = std::max<int64_t>(1, r.config.data.batch_size);
  for (int64_t at = 0; at < ds.size(); at += bs) {
    std::vector<data::Ids> srcs;
    std::vector<int64_t> lens;
    for (int64_t i = at; i < std::min(ds.size(), at + bs); ++i) {
      srcs.push_back(ds.examples[static_cast<size_t>(i)].src);
      lens.push_back(static_cast<int64_t>(srcs.back().size()) + extra);
    }
    std::vector<data::Ids> o =
        beam > 1 ? run::beam_decode(r.seq2seq("eval"), srcs, r.data.framing, beam, lens, alpha)
                 : run::greedy_decode(r.seq2seq("eval"), srcs, r.data.framing, lens);
    for (auto& x : o) outs.push_back(std::move(x));
  }
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const data::Ids& o : outs) d.hyps.push_back(data::decode_target(r.data, o));
  return d;
}

// The split to evaluate: valid, test or train, or for a parallel corpus any split of its folder
// by name (its configured split names too), loaded into `named`.
const data::Dataset& select_split(const EvalArgs& a, const run::LoadedRun& r,
                                  data::Dataset& named) {
  const data::Dataset* ds = a.split == "valid"   ? &r.data.valid
                            : a.split == "test"  ? &r.data.test
                            : a.split == "train" ? &r.data.train
                                                 : nullptr;
  const data::DataConfig& dc = r.config.data;
  const bool parallel = dc.task == data::TaskKind::parallel;
  if (parallel && (!ds || a.split == dc.valid_split || a.split == dc.test_split)) {
    if (a.split == dc.valid_split)
      ds = &r.data.valid;
    else if (a.split == dc.test_split)
      ds = &r.data.test;
    else {
      named = data::load_parallel_split(dc, r.data, a.split);
      ds = &named;
    }
  }
  QKV_CHECK(ds, "eval", "--split must be valid, test or train",
            parallel ? " or a split of the corpus folder" : "", ", got '", a.split, "'");
  return *ds;
}

// Text tasks: the decodes scored against the references, and how fast they were decoded.
struct TextScores {
  Decoded dec;
  data::BleuScore bleu;
  data::ChrfScore chrf;
  double sentences_per_second = 0;
};

// Decodes ds (--beam, --alpha), scores BLEU and chrF (--lowercase) and writes --hyp-out.
TextScores score_text(const EvalArgs& a, const run::LoadedRun& r, const data::Dataset& ds) {
  TextScores t;
  t.dec = decode_all(r, ds, a.beam, a.alpha);
  std::vector<std::string> refs;
  for (const auto& p : ds.text) refs.push_back(p.tgt);
  t.bleu = data::corpus_bleu(t.dec.hyps, refs, a.lowercase);
  t.chrf = data::corpus_chrf(t.dec.hyps, refs, a.lowercase);
  if (!a.hyp_out.empty()) {
    std::string all;
    for (const auto& h : t.dec.hyps) all += h + "\n";
    atomic_write_file(a.hyp_out, all);
  }
  t.sentences_per_second = t.dec.seconds > 0 ? static_cast<double>(ds.size()) / t.dec.seconds : 0.0;
  return t;
}

// The metrics as one JSON object; `text` null for the symbol tasks. lo: the regenerated
// split's shortest length (with --max-len).
void print_eval_json(const EvalArgs& a, const run::Metrics& m, int64_t lo, const TextScores* text) {
  nlohmann::json j = {{"loss", m.loss},
                      {"perplexity", run::perplexity(m.loss)},
                      {"token_accuracy", m.token_accuracy},
                      {"exact_match", m.exact_match},
                      {"examples", m.examples}};
  if (a.max_len > 0) {  // the regenerated split: its lengths and target tokens (with <eos>)
    j["min_len"] = lo;
    j["max_len"] = a.max_len;
    j["tokens"] = m.tokens;
  }
  if (text) {
    j["split"] = a.split;
    j["bleu"] = text->bleu.score;
    j["bleu_signature"] = text->bleu.signature;
    j["bleu_detail"] = text->bleu.format();
    j["chrf"] = text->chrf.score;
    j["chrf_signature"] = text->chrf.signature;
    j["metrics_implementation"] = data::kMetricsImplementation;
    j["decode"] = {{"beam", a.beam},
                   {"alpha", a.alpha},
                   {"seconds", text->dec.seconds},
                   {"sentences_per_second", text->sentences_per_second},
                   {"threads", get_num_threads()}};
  }
  std::printf("%s\n", j.dump().c_str());
}

// The metrics as text, the same as print_eval_json holds.
void print_eval_text(const EvalArgs& a, const run::LoadedRun& r, const run::Metrics& m, int64_t lo,
                     const TextScores* text) {
  std::printf("%s (%s, %s split, %lld examples", a.run_dir.c_str(), r.checkpoint.c_str(),
              a.split.c_str(), static_cast<long long>(m.examples));
  if (a.max_len > 0)
    std::printf(", lengths %lld..%lld", static_cast<long long>(lo),
                static_cast<long long>(a.max_len));
  std::printf(")\n");
  std::printf("  loss            %.4f\n  perplexity      %.4f (per target token)\n", m.loss,
              run::perplexity(m.loss));
  std::printf("  token accuracy  %.4f\n  exact match     %.4f\n", m.token_accuracy, m.exact_match);
  if (text) {
    std::printf("  %s\n    %s\n  %s\n    %s\n", text->bleu.format().c_str(),
                text->bleu.signature.c_str(), text->chrf.format().c_str(),
                text->chrf.signature.c_str());
    std::printf("  (%s; %s decoding: %.1f s, %.1f sentences/s, %d threads)\n",
                data::kMetricsImplementation,
                a.beam > 1 ? ("beam " + std::to_string(a.beam)).c_str() : "greedy",
                text->dec.seconds, text->sentences_per_second, get_num_threads());
  }
}

}  // namespace

int cmd_eval(const EvalArgs& a) {
  run::LoadedRun r = run::load_run(a.run_dir, a.checkpoint);
  // On stderr: --json's stdout stays one JSON object.
  if (const std::string note = run::kernel_change(a.run_dir, "eval"); !note.empty())
    std::fprintf(stderr, "qkv: note: %s\n", note.c_str());
  run::apply_threads(a.threads > 0 ? a.threads : r.config.threads,
                     a.threads > 0 ? "--threads" : "threads");
  // The products' precision for all the decoding below (the weights stay fixed in it).
  const PrecisionScope precision(
      run::choose_precision(a.precision, r.config.precision, "precision"));
  if (r.task().language_model()) return eval_lm(a, r);
  if (a.min_len > 0 && a.max_len == 0) throw Error("eval: --min-len needs --max-len");
  const int64_t lo = a.min_len > 0 ? a.min_len : std::min(r.config.data.min_len, a.max_len);
  if (a.max_len > 0) regenerate(r, lo, a.max_len);
  data::Dataset named;
  const data::Dataset& ds = select_split(a, r, named);
  check_learned(r, ds);
  const bool text = !run::is_symbol_task(r.config.data);
  QKV_CHECK(text || (a.beam == 1 && a.hyp_out.empty() && !a.lowercase), "eval",
            "--beam, --hyp-out and --lowercase are for text tasks (BLEU), not data.task = ",
            name_of(r.config.data.task));
  const run::Metrics m = run::evaluate(r.seq2seq("eval"), ds, r.data.framing,
                                       r.config.data.batch_size, r.config.train.max_decode_extra);
  TextScores scores;
  if (text) scores = score_text(a, r, ds);
  if (a.json)
    print_eval_json(a, m, lo, text ? &scores : nullptr);
  else
    print_eval_text(a, r, m, lo, text ? &scores : nullptr);
  return 0;
}

}  // namespace qkv::app
