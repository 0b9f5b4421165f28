// qkv: train, evaluate and decode attention models; check gradients; study saturation.
// Every error is one line on stderr and a non-zero exit: 1 for bad input or a failed run,
// 2 for command-line misuse, 128 + the signal when SIGINT, SIGTERM or SIGHUP interrupts a
// training (after writing a checkpoint): 130, 143, 129.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string_view>

#include "apps/cli_checks.hpp"
#include "apps/commands.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "core/nearest.hpp"
#include "core/openmp_wait.hpp"
#include "run/distributed.hpp"
#include "run/train_run.hpp"

using namespace qkv::app;
namespace run = qkv::run;
namespace config = qkv::config;

// OpenMP's idle threads sleep when another process keeps a core busy at start, spin otherwise
// (core/openmp_wait.hpp): chosen before libgomp loads.
QKV_OPENMP_WAIT_AT_START

namespace {

// One add_<command> per subcommand: its arguments, help texts, defaults and checks, bound to
// the fields of its Args (apps/commands.hpp).
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

void add_bench(CLI::App* cmd, BenchArgs& a) {
  cmd->add_option("--model", a.models,
                  "tiny, small, annotated, attention-4096, gpt-char, multi30k (default: all)");
  cmd->add_option("--threads", a.threads, "threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_flag("--compare", a.compare, "also run the PyTorch reference (apps/bench_reference.py)");
  cmd->add_option("--repeats", a.repeats, "rounds, median taken")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--min-seconds", a.min_seconds, "timed seconds per model and round")
      ->capture_default_str();
  cmd->add_option("--reference", a.reference, "PyTorch reference script");
  cmd->add_flag("--passive", a.passive,
                "OMP_WAIT_POLICY=passive for both sides (for a busy machine)");
  cmd->add_flag("--allow-unfair", a.allow_unfair,
                "compare even when a side runs on the reference BLAS, a pthread OpenBLAS inside "
                "OpenMP threads or more threads than cores (flagged in the table)");
  cmd->add_flag("--gemm-shapes", a.gemm_shapes,
                "also time qkv's step GEMM by GEMM: per shape calls, ms and GFLOP/s (a table per "
                "model, from the last round), and its time in and between parallel regions");
  cmd->add_option_function<std::string>(
         "--precision",
         [&a](const std::string& s) { a.precision = qkv::parse_precision(s, "--precision"); },
         "fp32, bf16 or auto (fp32 and, where the CPU runs bf16, bf16 too; with "
         "--compare PyTorch under torch.autocast beside qkv bf16)")
      ->default_str(qkv::precision_name(a.precision))
      ->check(one_of_names<qkv::Precision>("--precision"));
  cmd->add_flag("--child", a.child, "internal: run in this process")->group("");
  cmd->add_flag(
      "--attention-sweep", a.attention_sweep,
      "time and peak memory of dense, tiled, sliding-window and linear attention against n");
  cmd->add_option("--max-n", a.max_n, "longest sequence of --attention-sweep")
      ->capture_default_str();
  cmd->add_option("--figure", a.figure, "SVG written by --attention-sweep (\"\": none)")
      ->capture_default_str();
  cmd->add_option("--sweep-method", a.sweep_method, "internal: one sweep point")->group("");
  cmd->add_option("--sweep-n", a.sweep_n, "internal: one sweep point")->group("");
  cmd->add_flag("--data-parallel", a.data_parallel,
                "time data-parallel steps (run under mpirun: each rank its shard of the batch)");
  cmd->add_flag("--scaling", a.scaling,
                "data-parallel scaling: N=1 x T threads against N=2 x T/2 threads, via mpirun");
}

void add_gradcheck(CLI::App* cmd, GradcheckArgs& a) {
  cmd->add_flag("--all", a.all, "every layer (the default when no --layer or --config is given)");
  cmd->add_option("--layer", a.layers, "a layer to check (repeatable; --list names them)");
  cmd->add_flag("--list", a.list, "name the layers and exit");
  cmd->add_option("--config", a.config, "also check the Seq2Seq of this config's [model] section");
  cmd->add_option("--mask", a.mask, "attention mask: none, causal, padding or both")
      ->capture_default_str();
  cmd->add_option("--scale", a.scale,
                  "attention scale: default (1/sqrt(d_k)), none (1) or a number")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "inputs and parameters")->capture_default_str();
  cmd->add_flag("--json", a.json, "print one JSON object instead of the table");
}

void add_saturation(CLI::App* cmd, SaturationArgs& a) {
  cmd->add_option("--out", a.out, "output folder")->capture_default_str();
  cmd->add_option("--d-k", a.d_k, "widths, comma-separated (default 4,8,...,1024)")->delimiter(',');
  cmd->add_option("--keys", a.keys, "keys per softmax row (m)")->capture_default_str();
  cmd->add_option("--samples", a.samples, "q.k pairs for the variance")->capture_default_str();
  cmd->add_option("--rows", a.rows, "softmax rows per d_k")->capture_default_str();
  cmd->add_option("--batch", a.batch, "sequences for the gradient norms")->capture_default_str();
  cmd->add_option("--example-d-k", a.example_d_k, "d_k of the bar chart's row")
      ->capture_default_str();
  cmd->add_option("--train-steps", a.train_steps, "copy-task steps per scale (0: skip training)")
      ->capture_default_str();
  cmd->add_option("--train-d-model", a.train_d_model, "copy-task model width")
      ->capture_default_str();
  cmd->add_option("--train-heads", a.train_heads, "copy-task heads")->capture_default_str();
  cmd->add_option("--train-batch", a.train_batch, "copy-task batch size")->capture_default_str();
  cmd->add_option("--seed", a.seed, "random draws and training")->capture_default_str();
  cmd->add_option("--threads", a.threads, "threads (0: all cores)")
      ->capture_default_str()
      ->check(thread_count());
}

void add_layers(CLI::App* cmd, LayersArgs& a) {
  cmd->add_option("--out", a.out, "output folder")->capture_default_str();
  cmd->add_flag("--quick", a.quick, "a small sweep that runs in seconds");
  cmd->add_flag("--json", a.json, "print layers.json instead of the table");
  cmd->add_option("--lengths", a.lengths, "sequence lengths n, comma-separated")->delimiter(',');
  cmd->add_option("--d", a.d, "width of every layer")->capture_default_str();
  cmd->add_option("--heads", a.heads, "attention heads")->capture_default_str();
  cmd->add_option("--kernel", a.kernel, "conv kernel w")->capture_default_str();
  cmd->add_option("--conv-layers", a.conv_layers, "conv layers L")->capture_default_str();
  cmd->add_flag("--conv-causal", a.conv_causal, "causal conv padding (default: same)");
  cmd->add_option("--batch", a.batch, "sequences per timed pass")->capture_default_str();
  cmd->add_option("--repeats", a.repeats, "timed passes (median)")->capture_default_str();
  cmd->add_option("--profile-length", a.profile_length, "n of the gradient-norm profile")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "parameters and inputs")->capture_default_str();
  cmd->add_option("--threads", a.threads, "threads (0: all cores)")
      ->capture_default_str()
      ->check(thread_count());
}

void add_attention(CLI::App* cmd, AttentionArgs& a) {
  cmd->add_option("run_dir", a.run_dir, "run folder")->required();
  cmd->add_option("text", a.text, "the input")->required();
  cmd->add_option("--out", a.out, "map.png or map.svg")->required();
  cmd->add_option("--kind", a.kind,
                  "the attention site: encoder, decoder or cross (also spelt self and "
                  "decoder-self); self for a model of one site (default: the last: cross)");
  cmd->add_option("--layer", a.layer, "layer, from 1, or all (a grid; default: the last)")
      ->check(CLI::IsMember({"all"}) | CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--head", a.head, "head, from 1, mean, or all (a grid)")->capture_default_str();
  cmd->add_option("--checkpoint", a.checkpoint, "best, latest or a checkpoint's name (step-N)")
      ->capture_default_str()
      ->check(checkpoint_name());
  cmd->add_option("--cell", a.cell, "pixels per cell")
      ->capture_default_str()
      ->check(CLI::Range(4, 256));
  cmd->add_option("--threads", a.threads, "threads (default: the run's)")->check(thread_count());
  add_precision(cmd, a.precision);
  add_ablate(cmd, a.ablate);
}

void add_report(CLI::App* cmd, ReportArgs& a) {
  cmd->add_option("runs", a.runs, "run folders, or qkv saturation --out folders")->required();
  cmd->add_option("--out", a.out, "the HTML file")->capture_default_str();
  cmd->add_option("--examples", a.examples, "validation examples with attention maps, per run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100}));
  cmd->add_flag("--heads", a.heads, "every head's attention map too, not only their mean");
  cmd->add_option("--threads", a.threads, "threads (default: each run's)");
  cmd->add_option("--svg", a.svg_dir, "also write every chart as DIR/<its title>.svg");
}

void add_serve(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("runs", a.runs, "run folders, or qkv saturation --out folders")->required();
  cmd->add_option("--host", a.host, "address to listen on (other than 127.0.0.1: a warning)")
      ->capture_default_str();
  cmd->add_option("--port", a.port, "port (0: any free one, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--threads", a.threads, "compute threads per request")
      ->capture_default_str()
      ->check(thread_count());
  add_precision(cmd, a.precision);
}

// Every subcommand's arguments, filled in by the parse.
struct CommandArgs {
  TrainArgs train;
  TrainArgs config;
  EvalArgs eval;
  ScoreArgs score;
  AverageArgs average;
  TranslateArgs translate;
  ClassifyArgs classify;
  GenerateArgs generate;
  BenchArgs bench;
  GradcheckArgs gradcheck;
  SaturationArgs saturation;
  LayersArgs layers;
  AttentionArgs attention;
  HeadsArgs heads;
  LensArgs lens;
  PatchArgs patch;
  AttributeArgs attribute;
  ReportArgs report;
  ServeArgs serve;
};

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

// The subcommands, each named once: its name, its line of `qkv --help` (in this order), its
// arguments and what runs it. --help, the dispatch and the unknown-subcommand error read it.
struct Subcommand {
  std::string_view name;
  const char* help;
  void (*add_options)(CLI::App* cmd, CommandArgs& c);
  int (*run)(const CommandArgs& c);
};
const Subcommand kSubcommands[] = {
    {"train", "train a model from a TOML config (--section.key VALUE overrides a key)",
     [](CLI::App* cmd, CommandArgs& c) { add_train(cmd, c.train); },
     [](const CommandArgs& c) {
       return c.train.dry_run ? cmd_config(c.train) : cmd_train(c.train);
     }},
    {"config", "print a config with every default, and its run's size, steps and memory",
     [](CLI::App* cmd, CommandArgs& c) { add_config(cmd, c.config); },
     [](const CommandArgs& c) { return cmd_config(c.config); }},
    {"eval", "loss, token accuracy and exact match of a trained run",
     [](CLI::App* cmd, CommandArgs& c) { add_eval(cmd, c.eval); },
     [](const CommandArgs& c) { return cmd_eval(c.eval); }},
    {"score",
     "BLEU and chrF of a hypothesis file against a reference file (as sacrebleu REF < HYP)",
     [](CLI::App* cmd, CommandArgs& c) { add_score(cmd, c.score); },
     [](const CommandArgs& c) { return cmd_score(c.score); }},
    {"average", "average the weights of a run's last N checkpoints into a checkpoint",
     [](CLI::App* cmd, CommandArgs& c) { add_average(cmd, c.average); },
     [](const CommandArgs& c) { return cmd_average(c.average); }},
    {"translate", "decode inputs with a trained run (arguments, or lines on stdin)",
     [](CLI::App* cmd, CommandArgs& c) { add_translate(cmd, c.translate); },
     [](const CommandArgs& c) { return cmd_translate(c.translate); }},
    {"classify", "class probabilities of inputs with a trained run (arguments, or lines on stdin)",
     [](CLI::App* cmd, CommandArgs& c) { add_classify(cmd, c.classify); },
     [](const CommandArgs& c) { return cmd_classify(c.classify); }},
    {"generate", "sample text from a trained language model (model.kind = \"decoder\")",
     [](CLI::App* cmd, CommandArgs& c) { add_generate(cmd, c.generate); },
     [](const CommandArgs& c) { return cmd_generate(c.generate); }},
    {"bench", "time training steps of fixed models (--compare: next to PyTorch)",
     [](CLI::App* cmd, CommandArgs& c) { add_bench(cmd, c.bench); },
     [](const CommandArgs& c) { return cmd_bench(c.bench); }},
    {"gradcheck", "check every layer's gradients against central differences (float64)",
     [](CLI::App* cmd, CommandArgs& c) { add_gradcheck(cmd, c.gradcheck); },
     [](const CommandArgs& c) { return cmd_gradcheck(c.gradcheck); }},
    {"saturation", "why attention scales q.k by 1/sqrt(d_k): the measurements",
     [](CLI::App* cmd, CommandArgs& c) { add_saturation(cmd, c.saturation); },
     [](const CommandArgs& c) { return cmd_saturation(c.saturation); }},
    {"layers", "recurrence vs. convolution vs. self-attention: the lesson's table measured",
     [](CLI::App* cmd, CommandArgs& c) { add_layers(cmd, c.layers); },
     [](const CommandArgs& c) { return cmd_layers(c.layers); }},
    {"attention", "draw one attention matrix of a trained run as a heatmap",
     [](CLI::App* cmd, CommandArgs& c) { add_attention(cmd, c.attention); },
     [](const CommandArgs& c) { return cmd_attention(c.attention); }},
    {"heads", "which heads matter and what each does: importance, ablation losses, scores",
     [](CLI::App* cmd, CommandArgs& c) { add_heads(cmd, c.heads); },
     [](const CommandArgs& c) { return cmd_heads(c.heads); }},
    {"lens", "the logit lens: each layer's residual stream read through the output layer",
     [](CLI::App* cmd, CommandArgs& c) { add_lens(cmd, c.lens); },
     [](const CommandArgs& c) { return cmd_lens(c.lens); }},
    {"patch", "activation patching: how much of a clean run each head and position restores",
     [](CLI::App* cmd, CommandArgs& c) { add_patch(cmd, c.patch); },
     [](const CommandArgs& c) { return cmd_patch(c.patch); }},
    {"attribute", "which input and earlier output tokens each output token comes from",
     [](CLI::App* cmd, CommandArgs& c) { add_attribute(cmd, c.attribute); },
     [](const CommandArgs& c) { return cmd_attribute(c.attribute); }},
    {"report", "one self-contained HTML page of runs (overlaid) or qkv saturation results",
     [](CLI::App* cmd, CommandArgs& c) { add_report(cmd, c.report); },
     [](const CommandArgs& c) { return cmd_report(c.report); }},
    {"serve", "a local web page: runs' live curves, decoding, every layer's and head's attention",
     [](CLI::App* cmd, CommandArgs& c) { add_serve(cmd, c.serve); },
     [](const CommandArgs& c) { return cmd_serve(c.serve); }},
};

void add_subcommands(CLI::App& app, CommandArgs& c) {
  for (const Subcommand& s : kSubcommands)
    s.add_options(app.add_subcommand(std::string(s.name), s.help), c);
}

// Unless args (not yet reversed) start with an option or a subcommand: the one-line error
// naming the nearest subcommand, for exit 2. (CLI11 would say "A subcommand is required".)
std::optional<std::string> unknown_subcommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0].rfind('-', 0) == 0) return std::nullopt;
  std::vector<std::string_view> names;
  for (const Subcommand& s : kSubcommands) names.push_back(s.name);
  if (std::find(names.begin(), names.end(), args[0]) != names.end()) return std::nullopt;
  std::string list;
  for (const std::string_view n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  return "unknown subcommand '" + args[0] + "'" + qkv::did_you_mean(args[0], names, "'", "'") +
         " (the subcommands: " + list + ")";
}

// What CLI11 cannot check: overrides only for train, and train's config file or --resume (one,
// not both). Returns 2 (command-line misuse) after printing the error, 0 when the line is fine.
int check_train_usage(const CLI::App& app, const TrainArgs& train) {
  const bool is_train = app.got_subcommand("train");
  if (!train.overrides.empty() && !is_train && !app.got_subcommand("config")) {
    std::fprintf(stderr, "qkv: --section.key overrides are for qkv train and qkv config\n");
    return 2;
  }
  if (is_train && !train.resume.empty() && train.overwrite) {
    std::fprintf(stderr, "qkv: train --overwrite starts a new run; it does not go with --resume\n");
    return 2;
  }
  if (is_train && train.json && !train.dry_run) {
    std::fprintf(stderr, "qkv: train --json goes with --dry-run\n");
    return 2;
  }
  if (is_train && !train.resume.empty() && (!train.config.empty() || !train.overrides.empty())) {
    std::fprintf(stderr,
                 "qkv: train --resume takes the run folder's own config; give no config file or "
                 "overrides\n");
    return 2;
  }
  if (is_train && train.resume.empty() && train.config.empty()) {
    std::fprintf(stderr,
                 "qkv: train needs a config file (e.g. configs/copy.toml) or --resume RUN_DIR\n");
    return 2;
  }
  return 0;
}

// A failed run: one line and exit 1. A failing rank must stop the whole job, not leave the
// others waiting in a collective.
int fail(const char* what) {
  if (run::dist::size() > 1) {
    std::fprintf(stderr, "qkv: rank %d: %s\n", run::dist::rank(), what);
    std::fflush(stderr);
    run::dist::abort(1);
  }
  std::fprintf(stderr, "qkv: %s\n", what);
  return 1;
}

// Runs the subcommand the command line named; its exit code.
int run_command(const CLI::App& app, const CommandArgs& c) {
  for (const Subcommand& s : kSubcommands)
    if (app.got_subcommand(std::string(s.name))) return s.run(c);
  return 0;
}

// The line of an allocation that failed. Estimates refuse what cannot fit before allocating
// (run/limits.hpp); this is the last resort, still one line and exit 1 rather than an abort,
// and a new run's folder that holds no checkpoint yet is removed (run/train_run.hpp), so the
// same command can run again.
std::string out_of_memory() {
  std::string line =
      "out of memory: an allocation failed (std::bad_alloc); use a smaller model, batch or "
      "data set, or fewer threads";
  if (const std::string gone = run::discard_unfinished_run(); !gone.empty())
    line += " (removed the unfinished run folder " + gone + ")";
  return line;
}

// An exception that no handler caught (one thrown inside an OpenMP region or another thread,
// where it cannot reach run_reporting_errors): one line and exit 1, never an abort.
[[noreturn]] void uncaught() {
  std::string line = "internal error: the process ended on an exception no handler caught";
  try {
    if (const std::exception_ptr e = std::current_exception()) std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    line = out_of_memory();
  } catch (const std::exception& e) {
    line = "internal error: " + plain_message(e);
    run::discard_unfinished_run();
  } catch (...) {
  }
  std::fprintf(stderr, "qkv: %s\n", line.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// run_command with its errors reported as one line and exit 1.
int run_reporting_errors(const CLI::App& app, const CommandArgs& c) {
  std::set_terminate(uncaught);
  try {
    return run_command(app, c);
  } catch (const qkv::Error& err) {
    return fail(err.what());
  } catch (const std::bad_alloc&) {
    return fail(out_of_memory().c_str());
  } catch (const std::exception& err) {
    return fail(plain_message(err).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // --section.key VALUE overrides belong to `train` and `config`; take them out before CLI11 sees
  // them (it would read their values as positionals).
  CommandArgs c;
  try {
    if (!args.empty() && args[0] == "train") c.train.overrides = config::take_overrides(args);
    if (!args.empty() && args[0] == "config") c.config.overrides = config::take_overrides(args);
  } catch (const qkv::Error& e) {
    std::fprintf(stderr, "qkv: %s\n", e.what());
    return 2;
  }

  if (const std::optional<std::string> unknown = unknown_subcommand(args)) {
    std::fprintf(stderr, "qkv: %s\n", unknown->c_str());
    return 2;
  }
  CLI::App app{"qkv: a small, honest Transformer trainer for the CPU", "qkv"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qkv 0.1.0");
  add_subcommands(app, c);

  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& err) {
    const int code = app.exit(err);  // prints the message (or --help)
    return code == 0 ? 0 : 2;        // command-line misuse is always exit 2
  }
  if (const int misuse = check_train_usage(app, c.train)) return misuse;
  // MPI (data-parallel train and bench) only under mpirun; every rank parsed the same line.
  std::optional<run::dist::Session> mpi;
  if (app.got_subcommand("train") || app.got_subcommand("bench")) mpi.emplace();
  return run_reporting_errors(app, c);
}
