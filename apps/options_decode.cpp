// The options of the commands that run inputs through a trained run: translate,
// classify, generate.
// Each add_<command> binds a subcommand's arguments, help texts, defaults and checks to the
// fields of its Args (apps/commands.hpp); apps/main.cpp names the subcommands.
#include "apps/options.hpp"

#include "apps/cli_checks.hpp"

namespace qkv::app {

void add_translate(CLI::App* cmd, TranslateArgs& a) {
  add_input_options(cmd, a, "longest input, in tokens (decoding time grows with its square)");
  cmd->add_option("--beam", a.beam, "beam size (1: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--alpha", a.alpha, "length normalisation exponent for beam search (0 to 10)")
      ->capture_default_str()
      ->check(finite_range(0.0, 10.0));
  cmd->add_option("--max-len", a.max_len,
                  "longest output (default: input length + train.max_decode_extra)")
      ->check(CLI::Range(1, 100000));
}

void add_classify(CLI::App* cmd, ClassifyArgs& a) {
  add_input_options(cmd, a, "longest input, in tokens");
  cmd->add_flag("--json", a.json, "one JSON object per input (its tokens and every class's p)");
}

void add_generate(CLI::App* cmd, GenerateArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("--prompt", a.prompt, "text to continue (default: a newline)");
  cmd->add_option("--tokens", a.tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", a.temperature, "softmax temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", a.top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", a.top_p, "nucleus sampling: the smallest set with this mass")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "sampling seed")->capture_default_str();
  cmd->add_flag("--no-cache", a.no_cache,
                "re-read the whole context for every token (no key/value cache)");
  cmd->add_option("--checkpoint", a.checkpoint, "best or latest")->capture_default_str();
  cmd->add_option("--threads", a.threads, "threads (default: the run's)");
  cmd->add_flag("--quiet", a.quiet, "no tokens/s line on stderr");
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
}

}  // namespace qkv::app
