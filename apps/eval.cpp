// qkv eval DIR [--split valid|test|train|NAME] [--json] [--max-len N [--min-len N]]
//               [--beam K] [--hyp-out FILE] [--lowercase]
// Scores a split through the run's inference interface (run/inference.hpp) and prints what the
// family computed: loss and perplexity always; token accuracy and exact match for pairs; BLEU and
// chrF for text pairs; bits per character for a character language model.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "core/atomic_file.hpp"
#include "core/parallel.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"
#include "runfolder/provenance.hpp"

namespace qkv::app {
namespace {

double sentences_per_second(const run::Scores& s) {
  return s.decode_seconds > 0 ? static_cast<double>(s.examples) / s.decode_seconds : 0.0;
}

nlohmann::json scores_json(const EvalArgs& a, const run::Scores& s) {
  nlohmann::json j = {{"loss", s.loss}, {"perplexity", run::perplexity(s.loss)}};
  if (s.token_accuracy) j["token_accuracy"] = *s.token_accuracy;
  if (s.exact_match) j["exact_match"] = *s.exact_match, j["examples"] = s.examples;
  if (s.max_len > 0)  // a regenerated split: its lengths and target tokens (with <eos>)
    j["min_len"] = s.min_len, j["max_len"] = s.max_len, j["tokens"] = s.tokens;
  if (s.windows > 0) {
    j["tokens"] = s.tokens, j["windows"] = s.windows, j["block_size"] = s.block_size;
    if (s.per_character) j["bits_per_char"] = run::bits_per_token(s.loss);
  }
  if (s.bleu) {
    j["split"] = a.split;
    j["bleu"] = s.bleu->score;
    j["bleu_signature"] = s.bleu->signature;
    j["bleu_detail"] = s.bleu->format();
    j["chrf"] = s.chrf->score;
    j["chrf_signature"] = s.chrf->signature;
    j["metrics_implementation"] = data::kMetricsImplementation;
    j["decode"] = {{"beam", a.beam},
                   {"alpha", a.alpha},
                   {"seconds", s.decode_seconds},
                   {"sentences_per_second", sentences_per_second(s)},
                   {"threads", get_num_threads()}};
  }
  return j;
}

// The same figures as scores_json, as text.
void print_text(const EvalArgs& a, const run::Inference& inf, const run::Scores& s) {
  const std::string head = a.run_dir + " (" + inf.run().checkpoint + ", " + a.split + " split";
  if (s.windows > 0) {
    const char* unit = s.per_character ? "character" : "piece";
    std::printf("%s: %lld %ss in %lld windows of %lld)\n", head.c_str(),
                static_cast<long long>(s.tokens), unit, static_cast<long long>(s.windows),
                static_cast<long long>(s.block_size));
    std::printf("  loss            %.4f\n  perplexity      %.4f (per %s)\n", s.loss,
                run::perplexity(s.loss), unit);
    if (s.per_character) std::printf("  bits per char   %.4f\n", run::bits_per_token(s.loss));
    return;
  }
  std::printf("%s, %lld examples", head.c_str(), static_cast<long long>(s.examples));
  if (s.max_len > 0)
    std::printf(", lengths %lld..%lld", static_cast<long long>(s.min_len),
                static_cast<long long>(s.max_len));
  std::printf(")\n");
  std::printf("  loss            %.4f\n  perplexity      %.4f (per target token)\n", s.loss,
              run::perplexity(s.loss));
  std::printf("  token accuracy  %.4f\n  exact match     %.4f\n", *s.token_accuracy,
              *s.exact_match);
  if (!s.bleu) return;
  std::printf("  %s\n    %s\n  %s\n    %s\n", s.bleu->format().c_str(), s.bleu->signature.c_str(),
              s.chrf->format().c_str(), s.chrf->signature.c_str());
  std::printf("  (%s; %s decoding: %.1f s, %.1f sentences/s, %d threads)\n",
              data::kMetricsImplementation,
              a.beam > 1 ? ("beam " + std::to_string(a.beam)).c_str() : "greedy", s.decode_seconds,
              sentences_per_second(s), get_num_threads());
}

}  // namespace

int cmd_eval(const EvalArgs& a) {
  const auto inf = run::open_inference(
      a.run_dir,
      {.checkpoint = a.checkpoint, .precision = a.precision, .threads = a.threads, .op = "eval"});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "eval");
  // On stderr: --json's stdout stays one JSON object.
  if (const std::string note = run::kernel_change(a.run_dir, "eval"); !note.empty())
    std::fprintf(stderr, "qkv: note: %s\n", note.c_str());
  run::ScoreOptions o;
  o.split = a.split, o.max_len = a.max_len, o.min_len = a.min_len, o.lowercase = a.lowercase;
  o.decode.beam = a.beam, o.decode.alpha = a.alpha, o.hypotheses = !a.hyp_out.empty();
  const run::Scores s = inf->score(o);
  if (!a.hyp_out.empty()) {
    std::string all;
    for (const auto& h : s.hypotheses) all += h + "\n";
    atomic_write_file(a.hyp_out, all);
  }
  if (a.json)
    std::printf("%s\n", scores_json(a, s).dump().c_str());
  else
    print_text(a, *inf, s);
  return 0;
}

}  // namespace qkv::app
