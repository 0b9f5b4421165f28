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
#include "apps/options.hpp"
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
    {"report",
     "one self-contained HTML page of runs (overlaid) or of qkv saturation or qkv layers results",
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
