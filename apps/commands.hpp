// The qkv subcommands: one source file each, called by main.cpp after parsing the command line.
// Each returns the process exit code; errors are thrown as qkv::Error and reported by main.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/precision.hpp"
#include "inspect/token_attribution.hpp"
#include "inspect/work.hpp"

namespace qkv::app {

struct TrainArgs {
  std::string config, run_dir, resume;
  std::vector<std::pair<std::string, std::string>> overrides;  // ("model.d_model", "256")
  bool quiet = false, verbose = false;
  bool overwrite = false;  // replace an existing run folder (after taking its lock)
  bool dry_run = false;    // print the plan (cmd_config) instead of training
  bool json = false;       // the plan as one JSON object
};
int cmd_train(const TrainArgs& a);  // train.cpp
// qkv config CONFIG [--section.key VALUE ...] and qkv train ... --dry-run: the effective config
// with every default, the parameter count, steps and epochs, tokens per step and the memory
// estimate; reads the data, builds the model, writes nothing. (dry_run.cpp)
int cmd_config(const TrainArgs& a);

struct EvalArgs {
  std::string run_dir, split = "valid", checkpoint = "best";
  bool json = false;
  int threads = 0;
  // > 0: regenerate the synthetic split (copy / reverse / sort) with lengths in
  // [min_len, max_len] (min_len 0: the run's data.min_len), same seeds otherwise.
  int64_t max_len = 0, min_len = 0;
  // Text tasks: BLEU and chrF of these decodes (beam 1: greedy), optionally lowercased, and
  // the detokenized hypotheses written one per line to hyp_out.
  int beam = 1;
  double alpha = 1.0;
  bool lowercase = false;
  std::string hyp_out;
  std::optional<Precision> precision;  // fp32, bf16 or auto; unset: the run's
  std::string ablate;                  // --ablate L.H,...: heads zero-ablated (inspect/heads.hpp)
};
int cmd_eval(const EvalArgs& a);  // eval.cpp

// What every command that reads inputs through a trained run takes (translate, classify).
struct InputArgs {
  std::string run_dir, checkpoint = "best";
  std::vector<std::string> texts;  // empty: read lines from stdin
  int64_t max_input = 1024;        // the longest input read (run::OpenOptions::max_input)
  int threads = 0;
  std::optional<Precision> precision;  // fp32, bf16 or auto; unset: the run's
  std::string ablate;                  // --ablate L.H,...: heads zero-ablated (inspect/heads.hpp)
};

struct TranslateArgs : InputArgs {
  int beam = 1;
  double alpha = 1.0;
  int max_len = 0;  // 0: source length + train.max_decode_extra
};
int cmd_translate(const TranslateArgs& a);  // translate.cpp

struct ClassifyArgs : InputArgs {
  bool json = false;  // one JSON object per input instead of a text line
};
int cmd_classify(const ClassifyArgs& a);  // classify.cpp

struct GenerateArgs {
  std::string run_dir, checkpoint = "best";
  std::string prompt = "\n";  // nanoGPT's default start
  int64_t tokens = 500;
  double temperature = 0.8;  // nanoGPT sample.py's defaults
  int64_t top_k = 200;
  double top_p = 1.0;
  uint64_t seed = 1;
  bool no_cache = false;  // re-read the whole context for every token (the reference)
  bool quiet = false;     // no summary line on stderr
  int threads = 0;
  std::optional<Precision> precision;  // fp32, bf16 or auto; unset: the run's
  std::string ablate;                  // --ablate L.H,...: heads zero-ablated (inspect/heads.hpp)
};
int cmd_generate(const GenerateArgs& a);  // generate.cpp

// qkv average RUN --last N [--out DIR]: the mean of the run's last N checkpoints' weights, as a
// checkpoint folder (default RUN/checkpoints/average; runfolder/average.hpp). (average.cpp)
struct AverageArgs {
  std::string run_dir, out;
  int64_t last = 0;
};
int cmd_average(const AverageArgs& a);

// qkv score REF HYP: corpus BLEU and chrF of two line-aligned text files, as `sacrebleu REF <
// HYP -m bleu chrf` computes them by default.
struct ScoreArgs {
  std::string ref, hyp;
  bool lowercase = false, json = false;
};
int cmd_score(const ScoreArgs& a);  // score.cpp

struct BenchArgs {
  std::vector<std::string> models;  // empty: all (tiny, small, annotated, attention-4096, gpt-char)
  int threads = 2;
  bool json = false;
  bool compare = false;      // also run the PyTorch reference, side by side
  int repeats = 3;           // rounds; each side's result is the median over rounds
  double min_seconds = 2.0;  // timed steps per process: at least this long (and >= 5 steps)
  std::string reference;     // the reference script (default: apps/bench_reference.py)
  bool passive = false;      // OMP_WAIT_POLICY=passive for both sides (busy machines)
  bool child = false;        // internal: run the models in this process, print JSON lines
  // fp32, bf16, or auto: fp32 and, where bf16 can run, bf16 too (each side in both, side by side)
  Precision precision = Precision::auto_;
  // compare even when a side runs on the reference BLAS, a pthread OpenBLAS inside OpenMP
  // threads or more threads than cores (bench/bench_runtime.hpp); flagged in the table
  bool allow_unfair = false;
  // --attention-sweep: time and memory of attention variants against n (bench_sweep.cpp)
  bool attention_sweep = false;
  int64_t max_n = 8192;                        // n = 256, 512, ..., max_n
  std::string figure = "attention-sweep.svg";  // "" : no figure
  std::string sweep_method;                    // internal: run one point in this process
  int64_t sweep_n = 0;
  bool gemm_shapes = false;    // also time each GEMM shape of qkv's step (bench/gemm_shapes.hpp)
  bool data_parallel = false;  // in this process, as one rank of mpirun: its shard + allreduce
  bool scaling = false;        // data-parallel scaling table: N=1 against N=2 (via mpirun)
};
int cmd_bench(const BenchArgs& a);            // bench.cpp
int cmd_attention_sweep(const BenchArgs& a);  // bench_sweep.cpp

// --- the lesson's experiments (gradcheck.cpp, saturation.cpp, attention.cpp) ---
struct GradcheckArgs {
  bool all = false, list = false, json = false;
  std::vector<std::string> layers;  // --layer NAME ...
  std::string config;               // --config FILE: also check its [model]
  std::string mask = "both";        // none | causal | padding | both
  std::string scale = "default";    // default | none | a number
  uint64_t seed = 1;
};
int cmd_gradcheck(const GradcheckArgs& a);  // gradcheck.cpp

struct SaturationArgs {
  std::string out = "saturation";
  std::vector<int64_t> d_k;   // empty: 4, 8, ..., 1024
  int64_t keys = 10;          // m, keys per softmax row
  int64_t samples = 20000;    // q.k pairs for the variance
  int64_t rows = 2000;        // softmax rows per d_k
  int64_t batch = 8;          // sequences through MultiHeadAttention for the gradient norms
  int64_t example_d_k = 256;  // the bar chart's row
  int64_t train_steps = 120;  // copy-task steps per scale (0: no training)
  int64_t train_d_model = 256, train_heads = 1, train_batch = 32;
  uint64_t seed = 1;
  int threads = 0;
};
int cmd_saturation(const SaturationArgs& a);  // saturation.cpp

// qkv layers: the lesson's table "recurrence vs. convolution vs. self-attention" measured
// (figures/layer_study.hpp says what each number is).
struct LayersArgs {
  std::string out = "layers";
  bool quick = false;            // a small sweep in seconds (the tests')
  bool json = false;             // print layers.json instead of the table
  std::vector<int64_t> lengths;  // empty: 16, 32, ..., 1024 (quick: 8, 16, 32)
  int64_t d = 64, heads = 4, kernel = 3, conv_layers = 1, batch = 8, repeats = 5;
  int64_t profile_length = 64;
  bool conv_causal = false;
  uint64_t seed = 1;
  int threads = 0;
  // The length study (figures/length_study.hpp): train_steps 0 skips it; empty lists: its
  // defaults (quick: its small ones).
  int64_t train_steps = 1000, train_batch = 32, train_layers = 2, train_max_len = 10;
  int64_t eval_examples = 100;
  std::vector<std::string> train_models, train_tasks;
  std::vector<int64_t> eval_lengths;
};
int cmd_layers(const LayersArgs& a);  // layers.cpp

struct AttentionArgs {
  std::string run_dir, text, out;
  std::string kind;   // self (encoder) | decoder-self | cross; empty: cross, or self for an LM
  std::string layer;  // 1-based, or all (a grid); empty: the last
  std::string head = "mean";  // mean | 1-based head | all (a grid)
  std::string checkpoint = "best";
  int cell = 32;
  int threads = 0;
  std::optional<Precision> precision;  // fp32, bf16 or auto; unset: the run's
  std::string ablate;                  // --ablate L.H,...: heads zero-ablated (inspect/heads.hpp)
};
int cmd_attention(const AttentionArgs& a);  // attention.cpp

// qkv heads RUN: per head importance, ablation losses, entropy and pattern scores (heads.cpp)
struct HeadsArgs {
  std::string run_dir, split = "valid", checkpoint = "best", out, ablate;
  bool json = false;
  int64_t batches = -1;  // of the split (0: all; -1: up to 4, as many as max_work allows)
  int64_t probes = 4;    // repeated-token sequences, and examples for alignment
  int64_t max_work = inspect::kMaxHeadsWork;  // token passes (inspect/work.hpp)
  uint64_t seed = 1;
  int threads = 0;
  std::optional<Precision> precision;
};
int cmd_heads(const HeadsArgs& a);
// The table's columns, one line each with its description (qkv heads --help; heads.cpp).
std::string heads_columns_help();

// qkv lens RUN TEXT: the logit lens per layer (lens.cpp)
struct LensArgs {
  std::string run_dir, text, checkpoint = "best", ablate;
  std::optional<Precision> precision;
  std::string target;  // a token: its logit's direct attribution to heads and MLPs
  int64_t top = 5;
  int64_t position = -1;  // the pass's position read, from 0 (-1: the last)
  bool json = false;
  int threads = 0;
};
int cmd_lens(const LensArgs& a);

// qkv patch RUN --clean TEXT --corrupt TEXT: activation patching (patch.cpp)
struct PatchArgs {
  std::string run_dir, clean, corrupt, checkpoint = "best", out, ablate;
  std::optional<Precision> precision;
  bool json = false;
  int threads = 0;
  int64_t max_work = inspect::kMaxPatchWork;  // token passes (inspect/work.hpp)
  bool approx = false;  // attribution patching (inspect/attribution_patching.hpp)
  int64_t check = -1;   // --check K: exact patching of the K largest estimates (-1: not given)
  std::optional<std::string> path;  // --path SENDER: path patching (inspect/path_patching.hpp)
};
int cmd_patch(const PatchArgs& a);

// qkv attribute RUN TEXT: each output token's attribution to the input and earlier output
// tokens (attribute.cpp; inspect/token_attribution.hpp)
struct AttributeArgs {
  std::string run_dir, text, checkpoint = "best", ablate, out;
  std::optional<Precision> precision;
  std::string target, contrast;     // the outputs scored; the token they are set against
  std::string method = "saliency";  // inspect::attribution_method's names
  int64_t steps = 64, batch = 16;   // integrated gradients
  std::string baseline;             // integrated gradients: ig_baseline's names (empty: zero)
  int64_t tokens = 1;               // a language model's greedy next tokens (no --target)
  int64_t max_work = inspect::kMaxAttributionWork;  // token passes (inspect/work.hpp)
  bool json = false;
  int threads = 0;
};
int cmd_attribute(const AttributeArgs& a);

// qkv report RUN [RUN ...] --out report.html: one self-contained HTML page (report.hpp)
struct ReportArgs {
  std::vector<std::string> runs;  // run folders, or `qkv saturation --out` folders
  std::string out = "report.html";
  int64_t examples = 3;  // validation examples with attention maps, per run
  bool heads = false;    // every head's map too, not only their mean
  int threads = 0;       // 0: each run's own
  std::string svg_dir;   // non-empty: every chart also as DIR/<its title>.svg
};
int cmd_report(const ReportArgs& a);  // report.cpp

// qkv serve RUN [RUN ...]: the local web page and its JSON API (serve/server.hpp)
struct ServeArgs {
  std::vector<std::string> runs;  // run folders, or `qkv saturation --out` folders
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port, printed on stdout
  int threads = 1;                     // compute threads per request
  std::optional<Precision> precision;  // fp32, bf16 or auto; unset: each run's
};
int cmd_serve(const ServeArgs& a);  // serve.cpp

}  // namespace qkv::app
