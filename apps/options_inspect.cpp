// The options of the look-inside commands: heads, lens, patch, attribute.
// Each add_<command> binds a subcommand's arguments, help texts, defaults and checks to the
// fields of its Args (apps/commands.hpp); apps/main.cpp names the subcommands.
#include "apps/options.hpp"

#include "apps/cli_checks.hpp"

namespace qkv::app {

void add_heads(CLI::App* cmd, HeadsArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("--split", a.split, "the split of the losses and importance")
      ->capture_default_str();
  cmd->add_option("--checkpoint", a.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  cmd->add_option("--batches", a.batches,
                  "batches of the split (0: all; default: up to 4, as many as --max-work allows)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  cmd->add_option("--probes", a.probes, "repeated-token sequences (and examples for alignment)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--seed", a.seed, "the repeated sequences' tokens")->capture_default_str();
  add_max_work(cmd, a.max_work);
  cmd->add_option("--out", a.out, "a folder: one heatmap PNG (layer x head) per score");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_option("--threads", a.threads, "threads (default: the run's)")->check(thread_count());
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
  cmd->footer(heads_columns_help());
}

void add_lens(CLI::App* cmd, LensArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("text", a.text, "the input (a source, or a language model's text)")->required();
  cmd->add_option("--checkpoint", a.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  cmd->add_option("--target", a.target,
                  "a token: its logit split into the embedding's, each head's and each MLP's "
                  "parts (pre-LN models)");
  cmd->add_option("--top", a.top, "tokens shown per layer")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->add_option("--position", a.position,
                  "the position read, from 0 (a translator: of <bos> and its output; default: "
                  "the last)");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_option("--threads", a.threads, "threads (default: the run's)")->check(thread_count());
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
}

void add_patch(CLI::App* cmd, PatchArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("--clean", a.clean, "the clean input")->required();
  cmd->add_option("--corrupt", a.corrupt, "the corrupted input, of the same length")->required();
  cmd->add_option("--checkpoint", a.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  cmd->add_option("--out", a.out, "a folder: heads.png and residual.png heatmaps");
  cmd->add_flag("--approx", a.approx,
                "attribution patching: estimate every head x position and residual cell from "
                "one forward and backward, (clean - corrupted) . gradient");
  cmd->add_option("--check", a.check,
                  "with --approx: patch the K largest estimates exactly beside them (1..64)");
  cmd->add_option("--path", a.path,
                  "path patching: restore these heads' clean outputs (e.g. 1.0, cross.0.1, L1H0; "
                  "comma-separated) along each direct path alone, into each later head's q, k, "
                  "v, each MLP and the logits");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_option("--threads", a.threads, "threads (default: the run's)")->check(thread_count());
  add_max_work(cmd, a.max_work);
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
}

void add_attribute(CLI::App* cmd, AttributeArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("text", a.text, "the input (a source, a prompt, a classifier's symbols)")
      ->required();
  cmd->add_option("--checkpoint", a.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  cmd->add_option(
         "--method", a.method,
         "saliency, input-x-gradient, integrated-gradients, attention-rollout or value-zeroing")
      ->capture_default_str();
  cmd->add_option("--target", a.target,
                  "the output scored (a translation, a continuation, a class; default: the "
                  "model's own, greedy)");
  cmd->add_option("--contrast", a.contrast,
                  "a token: score logit(output) - logit(this token) (why this rather than that)");
  cmd->add_option("--tokens", a.tokens,
                  "a language model without --target: its greedy next tokens scored (1..64)")
      ->capture_default_str();
  cmd->add_option("--steps", a.steps, "integrated gradients: steps of the path (1..512)")
      ->capture_default_str();
  cmd->add_option("--baseline", a.baseline,
                  "integrated gradients: zero (every embedding 0, the default) or pad (every "
                  "token's embedding the padding token's)");
  cmd->add_option("--batch", a.batch, "integrated gradients: interpolated inputs per pass")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{512}));
  cmd->add_option("--out", a.out, "a heatmap: FILE.svg or FILE.png");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_option("--threads", a.threads, "threads (default: the run's)")->check(thread_count());
  add_max_work(cmd, a.max_work);
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
}

}  // namespace qkv::app
