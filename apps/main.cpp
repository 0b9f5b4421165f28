// qkv: train, evaluate and decode attention models; check gradients; study saturation.
// Every error is one line on stderr and a non-zero exit: 1 for bad input or a failed run,
// 2 for command-line misuse, 128 + the signal when SIGINT, SIGTERM or SIGHUP interrupts a
// training (after writing a checkpoint): 130, 143, 129.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "apps/cli_checks.hpp"
#include "apps/commands.hpp"
#include "config/config.hpp"
#include "run/distributed.hpp"
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

  auto* t = app.add_subcommand(
      "train", "train a model from a TOML config (--section.key VALUE overrides a key)");
  t->add_option("config", train.config, "config file, e.g. configs/copy.toml");
  t->add_option("--run-dir", train.run_dir, "run folder (default runs/<config name>)");
  t->add_option("--resume", train.resume,
                "continue the run in this folder from its last checkpoint");
  t->add_flag("--quiet", train.quiet, "only warnings and errors");
  t->add_flag("--verbose", train.verbose, "a log line every step");

  EvalArgs ev;
  auto* e = app.add_subcommand("eval", "loss, token accuracy and exact match of a trained run");
  e->add_option("run_dir", ev.run_dir, "run folder")->required();
  e->add_option("--split", ev.split, "valid, test or train")->capture_default_str();
  e->add_option("--checkpoint", ev.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  e->add_flag("--json", ev.json, "print one JSON object");
  e->add_option("--threads", ev.threads, "threads (default: the run's)")->check(thread_count());
  e->add_option(
       "--max-len", ev.max_len,
       "length generalisation: regenerate the split (copy, reverse, sort) with lengths up to N")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  e->add_option("--min-len", ev.min_len,
                "with --max-len: shortest length (default: the run's data.min_len)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  e->add_option("--beam", ev.beam, "text tasks: beam size for BLEU and chrF (1: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  e->add_option("--alpha", ev.alpha, "length normalisation exponent for beam search")
      ->capture_default_str();
  e->add_option("--hyp-out", ev.hyp_out, "text tasks: write the detokenized hypotheses here");
  e->add_flag("--lowercase", ev.lowercase, "text tasks: case-insensitive BLEU and chrF");

  ScoreArgs sc;
  auto* scr = app.add_subcommand(
      "score",
      "BLEU and chrF of a hypothesis file against a reference file (as sacrebleu REF < HYP)");
  scr->add_option("ref", sc.ref, "reference file, one sentence per line (plain or .gz)")
      ->required();
  scr->add_option("hyp", sc.hyp, "hypothesis file, line-aligned with the reference")->required();
  scr->add_flag("--lowercase", sc.lowercase, "case-insensitive (sacrebleu -lc)");
  scr->add_flag("--json", sc.json, "print one JSON object");

  TranslateArgs tr;
  auto* x = app.add_subcommand("translate",
                               "decode inputs with a trained run (arguments, or lines on stdin)");
  x->add_option("run_dir", tr.run_dir, "run folder")->required();
  x->add_option("texts", tr.texts, "inputs (default: stdin, one per line)");
  x->add_option("--beam", tr.beam, "beam size (1: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  x->add_option("--alpha", tr.alpha, "length normalisation exponent for beam search (0 to 10)")
      ->capture_default_str()
      ->check(finite_range(0.0, 10.0));
  x->add_option("--max-len", tr.max_len,
                "longest output (default: input length + train.max_decode_extra)")
      ->check(CLI::Range(1, 100000));
  x->add_option("--checkpoint", tr.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  x->add_option("--threads", tr.threads, "threads (default: the run's)")->check(thread_count());

  GenerateArgs gn;
  auto* gen = app.add_subcommand(
      "generate", "sample text from a trained language model (model.kind = \"decoder\")");
  gen->add_option("run_dir", gn.run_dir, "run folder")->required();
  gen->add_option("--prompt", gn.prompt, "text to continue (default: a newline)");
  gen->add_option("--tokens", gn.tokens, "tokens to generate")->capture_default_str();
  gen->add_option("--temperature", gn.temperature, "softmax temperature (0: greedy)")
      ->capture_default_str();
  gen->add_option("--top-k", gn.top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  gen->add_option("--top-p", gn.top_p, "nucleus sampling: the smallest set with this mass")
      ->capture_default_str();
  gen->add_option("--seed", gn.seed, "sampling seed")->capture_default_str();
  gen->add_flag("--no-cache", gn.no_cache,
                "re-read the whole context for every token (no key/value cache)");
  gen->add_option("--checkpoint", gn.checkpoint, "best or latest")->capture_default_str();
  gen->add_option("--threads", gn.threads, "threads (default: the run's)");
  gen->add_flag("--quiet", gn.quiet, "no tokens/s line on stderr");

  BenchArgs bn;
  auto* b = app.add_subcommand("bench",
                               "time training steps of fixed models (--compare: next to PyTorch)");
  b->add_option("--model", bn.models,
                "tiny, small, annotated, attention-4096, gpt-char, multi30k (default: all)");
  b->add_option("--threads", bn.threads, "threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  b->add_flag("--json", bn.json, "print one JSON object");
  b->add_flag("--compare", bn.compare, "also run the PyTorch reference (apps/bench_reference.py)");
  b->add_option("--repeats", bn.repeats, "rounds, median taken")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  b->add_option("--min-seconds", bn.min_seconds, "timed seconds per model and round")
      ->capture_default_str();
  b->add_option("--reference", bn.reference, "PyTorch reference script");
  b->add_flag("--passive", bn.passive,
              "OMP_WAIT_POLICY=passive for both sides (for a busy machine)");
  b->add_flag("--allow-unfair", bn.allow_unfair,
              "compare even when a side runs on the reference BLAS, a pthread OpenBLAS inside "
              "OpenMP threads or more threads than cores (flagged in the table)");
  b->add_flag("--child", bn.child, "internal: run in this process")->group("");
  b->add_flag(
      "--attention-sweep", bn.attention_sweep,
      "time and peak memory of dense, tiled, sliding-window and linear attention against n");
  b->add_option("--max-n", bn.max_n, "longest sequence of --attention-sweep")
      ->capture_default_str();
  b->add_option("--figure", bn.figure, "SVG written by --attention-sweep (\"\": none)")
      ->capture_default_str();
  b->add_option("--sweep-method", bn.sweep_method, "internal: one sweep point")->group("");
  b->add_option("--sweep-n", bn.sweep_n, "internal: one sweep point")->group("");
  b->add_flag("--data-parallel", bn.data_parallel,
              "time data-parallel steps (run under mpirun: each rank its shard of the batch)");
  b->add_flag("--scaling", bn.scaling,
              "data-parallel scaling: N=1 x T threads against N=2 x T/2 threads, via mpirun");

  GradcheckArgs gc;
  auto* gcc = app.add_subcommand(
      "gradcheck", "check every layer's gradients against central differences (float64)");
  gcc->add_flag("--all", gc.all, "every layer (the default when no --layer or --config is given)");
  gcc->add_option("--layer", gc.layers, "a layer to check (repeatable; --list names them)");
  gcc->add_flag("--list", gc.list, "name the layers and exit");
  gcc->add_option("--config", gc.config, "also check the Seq2Seq of this config's [model] section");
  gcc->add_option("--mask", gc.mask, "attention mask: none, causal, padding or both")
      ->capture_default_str();
  gcc->add_option("--scale", gc.scale,
                  "attention scale: default (1/sqrt(d_k)), none (1) or a number")
      ->capture_default_str();
  gcc->add_option("--seed", gc.seed, "inputs and parameters")->capture_default_str();
  gcc->add_flag("--json", gc.json, "print one JSON object instead of the table");

  SaturationArgs sa;
  auto* sat =
      app.add_subcommand("saturation", "why attention scales q.k by 1/sqrt(d_k): the measurements");
  sat->add_option("--out", sa.out, "output folder")->capture_default_str();
  sat->add_option("--d-k", sa.d_k, "widths, comma-separated (default 4,8,...,1024)")
      ->delimiter(',');
  sat->add_option("--keys", sa.keys, "keys per softmax row (m)")->capture_default_str();
  sat->add_option("--samples", sa.samples, "q.k pairs for the variance")->capture_default_str();
  sat->add_option("--rows", sa.rows, "softmax rows per d_k")->capture_default_str();
  sat->add_option("--batch", sa.batch, "sequences for the gradient norms")->capture_default_str();
  sat->add_option("--example-d-k", sa.example_d_k, "d_k of the bar chart's row")
      ->capture_default_str();
  sat->add_option("--train-steps", sa.train_steps, "copy-task steps per scale (0: skip training)")
      ->capture_default_str();
  sat->add_option("--train-d-model", sa.train_d_model, "copy-task model width")
      ->capture_default_str();
  sat->add_option("--train-heads", sa.train_heads, "copy-task heads")->capture_default_str();
  sat->add_option("--train-batch", sa.train_batch, "copy-task batch size")->capture_default_str();
  sat->add_option("--seed", sa.seed, "random draws and training")->capture_default_str();
  sat->add_option("--threads", sa.threads, "threads (0: all cores)")
      ->capture_default_str()
      ->check(thread_count());

  AttentionArgs at;
  auto* att =
      app.add_subcommand("attention", "draw one attention matrix of a trained run as a heatmap");
  att->add_option("run_dir", at.run_dir, "run folder")->required();
  att->add_option("text", at.text, "the input")->required();
  att->add_option("--out", at.out, "map.png or map.svg")->required();
  att->add_option("--kind", at.kind,
                  "self (encoder), decoder-self or cross (default: cross; self for a language "
                  "model)");
  att->add_option("--layer", at.layer, "layer, from 1 (default: the last)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  att->add_option("--head", at.head, "head, from 1, or mean")->capture_default_str();
  att->add_option("--checkpoint", at.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  att->add_option("--cell", at.cell, "pixels per cell")
      ->capture_default_str()
      ->check(CLI::Range(4, 256));
  att->add_option("--threads", at.threads, "threads (default: the run's)")->check(thread_count());

  ReportArgs rp;
  auto* rep = app.add_subcommand(
      "report", "one self-contained HTML page of runs (overlaid) or qkv saturation results");
  rep->add_option("runs", rp.runs, "run folders, or qkv saturation --out folders")->required();
  rep->add_option("--out", rp.out, "the HTML file")->capture_default_str();
  rep->add_option("--examples", rp.examples, "validation examples with attention maps, per run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100}));
  rep->add_flag("--heads", rp.heads, "every head's attention map too, not only their mean");
  rep->add_option("--threads", rp.threads, "threads (default: each run's)");

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
  if (t->parsed() && !train.resume.empty() && (!train.config.empty() || !train.overrides.empty())) {
    std::fprintf(stderr,
                 "qkv: train --resume takes the run folder's own config; give no config file or "
                 "overrides\n");
    return 2;
  }
  if (t->parsed() && train.resume.empty() && train.config.empty()) {
    std::fprintf(stderr,
                 "qkv: train needs a config file (e.g. configs/copy.toml) or --resume RUN_DIR\n");
    return 2;
  }
  // MPI (data-parallel train and bench) only under mpirun; every rank parsed the same line.
  std::optional<dist::Session> mpi;
  if (t->parsed() || b->parsed()) mpi.emplace();
  // A failing rank must stop the whole job, not leave the others waiting in a collective.
  auto fail = [](const char* what) {
    if (dist::size() > 1) {
      std::fprintf(stderr, "qkv: rank %d: %s\n", dist::rank(), what);
      std::fflush(stderr);
      dist::abort(1);
    }
    std::fprintf(stderr, "qkv: %s\n", what);
    return 1;
  };
  try {
    if (t->parsed()) return cmd_train(train);
    if (e->parsed()) return cmd_eval(ev);
    if (x->parsed()) return cmd_translate(tr);
    if (gen->parsed()) return cmd_generate(gn);
    if (scr->parsed()) return cmd_score(sc);
    if (gcc->parsed()) return cmd_gradcheck(gc);
    if (sat->parsed()) return cmd_saturation(sa);
    if (att->parsed()) return cmd_attention(at);
    if (b->parsed()) return cmd_bench(bn);
    if (rep->parsed()) return cmd_report(rp);
  } catch (const qkv::Error& err) {
    return fail(err.what());
  } catch (const std::bad_alloc&) {
    // Estimates refuse what cannot fit before allocating (run/limits.hpp); this is the last
    // resort, still one line and exit 1 rather than an abort.
    return fail(
        "out of memory: an allocation failed (std::bad_alloc); use a smaller model, "
        "batch or data set, or fewer threads");
  } catch (const std::exception& err) {
    return fail(plain_message(err).c_str());
  }
  return 0;
}
