// qkv: train, evaluate and decode attention models; check gradients; study saturation.
// Every error is one line on stderr and a non-zero exit: 1 for bad input or a failed run,
// 2 for command-line misuse, 130 when interrupted (after writing a checkpoint).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "apps/commands.hpp"
#include "apps/config.hpp"
#include "core/error.hpp"

using namespace qkv::app;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // --section.key VALUE overrides belong to `train`; take them out before CLI11 sees them
  // (it would read their values as positionals).
  TrainArgs train;
  try {
    if (!args.empty() && args[0] == "train") train.overrides = take_overrides(args);
  } catch (const qkv::Error& e) {
    std::fprintf(stderr, "qkv: %s\n", e.what());
    return 2;
  }

  CLI::App app{"qkv: a small, honest Transformer trainer for the CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qkv 0.1.0");

  auto* t = app.add_subcommand("train", "train a model from a TOML config (--section.key VALUE overrides a key)");
  t->add_option("config", train.config, "config file, e.g. configs/copy.toml");
  t->add_option("--run-dir", train.run_dir, "run folder (default runs/<config name>)");
  t->add_option("--resume", train.resume, "continue the run in this folder from its last checkpoint");
  t->add_flag("--quiet", train.quiet, "only warnings and errors");
  t->add_flag("--verbose", train.verbose, "a log line every step");

  EvalArgs ev;
  auto* e = app.add_subcommand("eval", "loss, token accuracy and exact match of a trained run");
  e->add_option("run_dir", ev.run_dir, "run folder")->required();
  e->add_option("--split", ev.split, "valid, test or train")->capture_default_str();
  e->add_option("--checkpoint", ev.checkpoint, "best or latest")->capture_default_str();
  e->add_flag("--json", ev.json, "print one JSON object");
  e->add_option("--threads", ev.threads, "threads (default: the run's)");

  TranslateArgs tr;
  auto* x = app.add_subcommand("translate", "decode inputs with a trained run (arguments, or lines on stdin)");
  x->add_option("run_dir", tr.run_dir, "run folder")->required();
  x->add_option("texts", tr.texts, "inputs (default: stdin, one per line)");
  x->add_option("--beam", tr.beam, "beam size (1: greedy)")->capture_default_str()->check(CLI::Range(1, 256));
  x->add_option("--alpha", tr.alpha, "length normalisation exponent for beam search")->capture_default_str();
  x->add_option("--max-len", tr.max_len, "longest output (default: input length + train.max_decode_extra)");
  x->add_option("--checkpoint", tr.checkpoint, "best or latest")->capture_default_str();
  x->add_option("--threads", tr.threads, "threads (default: the run's)");

  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& err) {
    const int code = app.exit(err);  // prints the message (or --help)
    return code == 0 ? 0 : 2;        // command-line misuse is always exit 2
  }
  if (!train.overrides.empty() && !t->parsed()) {
    std::fprintf(stderr, "qkv: --section.key overrides are for qkv train\n");
    return 2;
  }
  try {
    if (t->parsed()) return cmd_train(train);
    if (e->parsed()) return cmd_eval(ev);
    if (x->parsed()) return cmd_translate(tr);
  } catch (const qkv::Error& err) {
    std::fprintf(stderr, "qkv: %s\n", err.what());
    return 1;
  } catch (const std::exception& err) {
    std::fprintf(stderr, "qkv: %s\n", err.what());
    return 1;
  }
  return 0;
}
