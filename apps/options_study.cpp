// The options of the measuring and drawing commands: bench, gradcheck, saturation,
// layers, attention, report, serve.
// Each add_<command> binds a subcommand's arguments, help texts, defaults and checks to the
// fields of its Args (apps/commands.hpp); apps/main.cpp names the subcommands.
#include "apps/options.hpp"

#include "apps/cli_checks.hpp"

namespace qkv::app {

void add_bench(CLI::App* cmd, BenchArgs& a) {
  cmd->add_option(
      "--model", a.models,
      "tiny, small, annotated, attention-4096, gpt-char, multi30k, bahdanau (default: all)");
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
  cmd->add_option("--train-steps", a.train_steps,
                  "steps of each model on each task for exact match against length (0: skip)")
      ->capture_default_str();
  cmd->add_option("--train-models", a.train_models,
                  "attention, gru, lstm, conv, gru-no-attention, bahdanau (default: all)")
      ->delimiter(',');
  cmd->add_option("--train-tasks", a.train_tasks, "copy, reverse (default: both)")->delimiter(',');
  cmd->add_option("--train-batch", a.train_batch, "examples per training step")
      ->capture_default_str();
  cmd->add_option("--train-layers", a.train_layers, "encoder layers of the trained models")
      ->capture_default_str();
  cmd->add_option("--train-max-len", a.train_max_len, "training lengths 1 .. this")
      ->capture_default_str();
  cmd->add_option("--eval-lengths", a.eval_lengths,
                  "lengths scored by exact match (default 2,4,...,16,20,30)")
      ->delimiter(',');
  cmd->add_option("--eval-examples", a.eval_examples, "examples per scored length")
      ->capture_default_str();
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
  cmd->add_option("runs", a.runs, "run folders, or qkv saturation / qkv layers --out folders")
      ->required();
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

}  // namespace qkv::app
