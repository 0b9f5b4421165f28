// The options several commands share: --precision, --ablate, --max-work and the
// inputs of the commands that read text through a trained run.
#include "apps/options.hpp"

#include "apps/cli_checks.hpp"

namespace qkv::app {

// --precision of the inference commands (unset: the run's), parsed here once by Precision's
// names table (core/precision.hpp).
void add_precision(CLI::App* cmd, std::optional<qkv::Precision>& precision) {
  cmd->add_option_function<std::string>(
         "--precision",
         [&precision](const std::string& s) { precision = qkv::parse_precision(s, "--precision"); },
         "fp32, bf16 or auto: the linear layers' products (default: the run's)")
      ->check(one_of_names<qkv::Precision>("--precision"));
}

// --ablate of the inference commands: heads removed (their output z set to 0) in every pass.
void add_ablate(CLI::App* cmd, std::string& ablate) {
  cmd->add_option("--ablate", ablate,
                  "heads to remove, from 0: L.H,... (a language model) or encoder.L.H, "
                  "decoder.L.H, cross.L.H (an encoder-decoder)");
}

// --max-work of heads and patch: the token passes (forward passes x their tokens) a command may
// run; past it the command is refused before any pass (inspect/work.hpp).
void add_max_work(CLI::App* cmd, int64_t& max_work) {
  cmd->add_option("--max-work", max_work,
                  "the most token passes (forward passes x their tokens) to run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50));
}

// The options of every command that reads inputs through a trained run; max_input_help: what
// --max-input guards against for this command.
void add_input_options(CLI::App* cmd, InputArgs& a, const std::string& max_input_help) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("texts", a.texts, "inputs (default: stdin, one per line)");
  cmd->add_option("--max-input", a.max_input, max_input_help)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--checkpoint", a.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  cmd->add_option("--threads", a.threads, "threads (default: the run's)")->check(thread_count());
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
}

}  // namespace qkv::app
