// The options of the commands that make and score runs: train, config, eval, average,
// score.
// Each add_<command> binds a subcommand's arguments, help texts, defaults and checks to the
// fields of its Args (apps/commands.hpp); apps/main.cpp names the subcommands.
#include "apps/options.hpp"

#include "apps/cli_checks.hpp"

namespace qkv::app {

void add_train(CLI::App* cmd, TrainArgs& a) {
  cmd->add_option("config", a.config, "config file, e.g. configs/copy.toml");
  cmd->add_option("--run-dir", a.run_dir, "run folder (default runs/<config name>)");
  cmd->add_option("--resume", a.resume, "continue the run in this folder from its last checkpoint");
  cmd->add_flag("--quiet", a.quiet, "only warnings and errors");
  cmd->add_flag("--verbose", a.verbose, "a log line every step");
  cmd->add_flag("--overwrite", a.overwrite,
                "replace the run folder's old run (after taking its lock)");
  cmd->add_flag("--dry-run", a.dry_run,
                "print the effective config and the plan (as qkv config); train nothing");
  cmd->add_flag("--json", a.json, "with --dry-run: print one JSON object");
}

void add_config(CLI::App* cmd, TrainArgs& a) {
  cmd->add_option("config", a.config, "config file, e.g. configs/copy.toml")->required();
  cmd->add_option("--run-dir", a.run_dir, "run folder (default runs/<config name>)");
  cmd->add_flag("--json", a.json, "print one JSON object");
}

void add_eval(CLI::App* cmd, EvalArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("--split", a.split, "valid, test or train")->capture_default_str();
  cmd->add_option("--checkpoint", a.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_option("--threads", a.threads, "threads (default: the run's)")->check(thread_count());
  cmd->add_option(
         "--max-len", a.max_len,
         "length generalisation: regenerate the split (copy, reverse, sort) with lengths up to N")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_option("--min-len", a.min_len,
                  "with --max-len: shortest length (default: the run's data.min_len)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_option("--beam", a.beam, "text tasks: beam size for BLEU and chrF (1: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--alpha", a.alpha, "length normalisation exponent for beam search")
      ->capture_default_str();
  cmd->add_option("--hyp-out", a.hyp_out, "text tasks: write the detokenized hypotheses here");
  cmd->add_flag("--lowercase", a.lowercase, "text tasks: case-insensitive BLEU and chrF");
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
}

void add_average(CLI::App* cmd, AverageArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("--last", a.last, "how many of the newest checkpoints")->required();
  cmd->add_option("--out", a.out,
                  "the averaged checkpoint folder (default RUN/checkpoints/average: "
                  "--checkpoint average of eval, translate and generate)");
}

void add_score(CLI::App* cmd, ScoreArgs& a) {
  cmd->add_option("ref", a.ref, "reference file, one sentence per line (plain or .gz)")->required();
  cmd->add_option("hyp", a.hyp, "hypothesis file, line-aligned with the reference")->required();
  cmd->add_flag("--lowercase", a.lowercase, "case-insensitive (sacrebleu -lc)");
  cmd->add_flag("--json", a.json, "print one JSON object");
}

}  // namespace qkv::app
