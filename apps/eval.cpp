// qkv eval DIR [--split valid|test|train|NAME] [--json] [--max-len N [--min-len N]]
//               [--beam K] [--hyp-out FILE] [--lowercase]
// Scores a split through the run's inference interface (run/inference.hpp) and prints the
// metrics the run's family computed (run/scores.hpp), whatever they are: loss and perplexity
// always; token accuracy and exact match for pairs; BLEU and chrF for text pairs; bits per
// character for a character language model.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "core/atomic_file.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"
#include "runfolder/provenance.hpp"

namespace qkv::app {
namespace {

// The figures of run::scores_json, as text: a heading saying what was scored, a line per metric
// (or the metric's own lines), then the family's notes.
void print_text(const EvalArgs& a, const run::Inference& inf, const run::Scores& s) {
  std::printf("%s (%s, %s split%s)\n", a.run_dir.c_str(), inf.run().checkpoint.c_str(),
              a.split.c_str(), s.summary.c_str());
  for (const run::Metric& m : s.metrics) {
    if (m.text.empty()) std::printf("  %s\n", run::metric_line(m).c_str());
    for (const std::string& line : m.text) std::printf("  %s\n", line.c_str());
  }
  for (const std::string& line : s.notes) std::printf("  %s\n", line.c_str());
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
    std::printf("%s\n", run::scores_json(s).dump().c_str());
  else
    print_text(a, *inf, s);
  return 0;
}

}  // namespace qkv::app
