// Inference: what every consumer of a trained run asks of it -- `qkv eval`, `translate`,
// `generate`, `attention`, `report` and `qkv serve` -- in one class for every family. A consumer
// opens a run and calls; it never asks which family the model is.
//
//   auto inf = run::open_inference("runs/demo", {.checkpoint = "best"});
//   data::Ids src = inf->encode("3 1 4", "translate");
//   data::Ids out = inf->decode({src}, {.beam = 5})[0];
//   std::cout << inf->text(out);
//
// Every call runs in an InferenceScope: eval mode, no recording, the run's precision (or the
// one asked for), all restored after. Calls run under the calling thread's hooks (nn/hooks.hpp):
// an ablation is a HookScope around the calls (inspect::Ablation); a call that needs hooks of its
// own (PassOptions::hooks, logits(..., hooks), inspect's patterns) pushes them as an inner layer,
// so the caller's stay in place. The reading of input text lives here once; the length rules are
// the family's (Family::max_input_tokens, max_output_tokens, scored_output_tokens).
//
// Threads: calls on one Inference run concurrently from any number of threads (qkv serve asks
// one loaded checkpoint from many requests at once). A pass shares only what it reads: the
// model stays in eval mode for the Inference's life (InferenceScope writes no flag that is
// already what it wants), and what a pass changes is its thread's own (precision, bf16 copies,
// thread-invariant products, the tape switch, hooks, the cancellation token) or its call's (KV
// caches, decode states). Locks remain where something is shared and written: the data read
// again once (full_data: a language model's text splits, their own lock), and a pass that
// records a tape (record = true), whose backward adds into the weights' gradients: such calls
// run one at a time on an Inference. Each call is a cancellation point (core/cancel.hpp), and
// so is each batch, decoded token and sampled token inside one.
//
// One class for every family: an Inference holds one loaded run (its weights, data, precision
// and scope) and asks the run's Family (run/family.hpp) for everything family-specific -- how
// text is read, what a pass is, what a split's scores are -- so a consumer holds an Inference
// and never a family's name. Each model shows its attention sites (nn/attention_site.hpp), one
// view per site (views_of). The run lists its capabilities (run/capability.hpp); an operation
// it cannot do throws qkv::Error from require, naming what it can do instead.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "data/metrics.hpp"
#include "nn/attention_site.hpp"
#include "nn/hooks.hpp"
#include "nn/inference_scope.hpp"
#include "run/capability.hpp"
#include "run/lm.hpp"
#include "run/run.hpp"
#include "run/scores.hpp"

namespace qkv::run {

struct Classification {
  std::vector<std::string> classes;
  std::vector<double> probabilities;
  int64_t predicted = 0;  // the most probable class (the lowest id on a tie)
};

// One input's classification as `qkv classify --json` prints it (one line per input) and the
// Python module's run.classify returns it: {"input", "tokens": its labels, "predicted",
// "classes": [{"class", "p"}...]} in class-id order.
nlohmann::json classification_json(const std::string& input, const std::vector<std::string>& tokens,
                                   const Classification& c);

struct DecodeOptions {
  int64_t beam = 1;     // 1: greedy
  double alpha = 1.0;   // beam: hypotheses ranked by log P / length^alpha
  int64_t max_len = 0;  // > 0: at most this many tokens; 0: max_output_tokens(input)
};

// What `qkv eval` asks: a split scored.
struct ScoreOptions {
  std::string split = "valid";
  int64_t max_len = 0, min_len = 0;  // > 0: a synthetic task regenerated at these lengths
  DecodeOptions decode;              // text tasks: how BLEU's hypotheses are decoded
  bool lowercase = false;            // BLEU and chrF case-insensitive
  bool hypotheses = false;           // the decodes are wanted (--hyp-out): text tasks only
};

// One attention site over one input, every layer: what a page or a figure draws.
struct AttentionView {
  nn::AttentionSite site;  // which attention: its name, title, sides, hook points
  // Its pattern's hook point with the layer written {l}: "decoder.blocks.{l}.cross.pattern"
  std::string hook;
  std::vector<std::string> rows, cols;  // axis labels: queries, keys
  std::vector<Tensor> layers;           // each (h, n, m) float32
};

// One input through the model: its output, the logits of one pass over that output (a
// language model: over the input itself) and every attention map, captured at the hook points
// of that pass.
struct Inspection {
  data::Ids input;                   // source ids, or the text's ids
  data::Ids output;                  // greedy output (no <bos>/<eos>), or the next-token guesses
  data::Ids tgt_in, tgt_out;         // the pass's decoder input and labels
  Tensor logits;                     // (T, V): one row per position of tgt_in
  std::vector<AttentionView> views;  // in forward order
  // The view whose hook is `hook` ("decoder.blocks.{l}.cross.pattern"); null when none.
  const AttentionView* view(const std::string& hook) const;
};

// The top-k next tokens at each position of an inspection's pass.
struct NextTokens {
  std::string at;                                   // the position's label
  std::vector<std::pair<std::string, double>> top;  // (token, probability), most likely first
};

// One batch of a split through the model, teacher-forced as training scores it
// (Inference::for_each_batch).
struct BatchPass {
  ag::Var loss;        // mean cross-entropy per scored token, a scalar (on the tape when recording)
  int64_t tokens = 0;  // tokens scored: the loss's weight in a mean over batches
  Tensor input_valid;  // (B, S) bool, true on real source positions (the encoder's queries);
                       // undefined for a language model
  Tensor output_valid;  // (B, T) bool, true on real positions of the output side (the decoder's
                        // or the language model's queries)
};

struct PassOptions {
  std::string split = "valid";  // as ScoreOptions::split
  int64_t max_batches = 0;      // > 0: the first this many batches only
  bool record = false;          // record a tape: the handler may call pass.loss.backward()
  nn::Hooks* hooks = nullptr;   // a layer of hooks for these passes, inside the caller's
};

class Inference {
 public:
  // Puts the model in eval mode for good: calls from many threads then only read the flag.
  Inference(LoadedRun run, Precision p);
  Inference(const Inference&) = delete;
  Inference& operator=(const Inference&) = delete;

  const LoadedRun& run() const { return run_; }
  const nn::Model& model() const { return *run_.model; }
  const Family& family() const { return run_.family(); }
  Precision precision() const { return precision_; }
  // The longest input encode accepts (OpenOptions::max_input).
  void set_max_input(int64_t n) { max_input_ = n; }
  int64_t max_input() const { return max_input_; }

  // --- text in and out
  // The ids of one input (a source, or a prompt), read as the run's data was; an empty input,
  // an unknown symbol or one longer than max_input_tokens throws qkv::Error naming op.
  data::Ids encode(const std::string& text, const char* op) const;
  // Output ids as text: symbols joined by spaces, detokenized text, a language model's text.
  std::string text(const data::Ids& ids) const;
  // Labels for the axes of maps: input ids, or output-side ids.
  std::vector<std::string> input_labels(const data::Ids& ids) const;
  std::vector<std::string> output_labels(const data::Ids& ids) const;
  // The longest input the model reads (its context or source positions): the family's rule
  // (Family::max_input_tokens).
  int64_t max_input_tokens() const;
  // The decode-length rule: the most tokens an output of an input of n tokens may have
  // (Family::max_output_tokens: n + train.max_decode_extra; a language model's has no end).
  int64_t max_output_tokens(int64_t n) const;
  // The tokens one inspect of an input of n tokens puts through the model
  // (Family::inspection_tokens).
  int64_t inspection_tokens(int64_t n) const;

  // --- what the run can do beyond scoring and looking inside (run/capability.hpp)
  // The run's family's (Family::capabilities): the same for every run of a family.
  std::vector<Capability> capabilities() const;
  bool can(Capability c) const;
  // A no-op when the run can c; otherwise qkv::Error naming op, the run and what it can do
  // instead ("runs/copy cannot generate (a model that can translate): use qkv translate").
  void require(Capability c, const char* op) const;

  // Each input's output (greedy, or beam search); stops at <eos> or the length rule.
  // Capability::decode.
  std::vector<data::Ids> decode(const std::vector<data::Ids>& inputs, const DecodeOptions& o) const;
  // n tokens sampled after prompt, each handed to on_token as it is made (cached: the KV cache).
  // Capability::generate.
  void generate(const data::Ids& prompt, int64_t n, const SampleOptions& o, Generator& gen,
                bool cached, const std::function<void(int64_t)>& on_token) const;
  // Each input's class probabilities, in class-id order. Capability::classify.
  std::vector<Classification> classify(const std::vector<data::Ids>& inputs) const;

  // --- scoring and looking inside
  // A split scored: the family's metrics, named and formatted (run/scores.hpp).
  Scores score(const ScoreOptions& o) const;
  // One input through the model as the family passes it (Family::inspect), in this run's scope.
  Inspection inspect(const data::Ids& input) const;
  // The site `qkv attention` draws by default, the map that shows the most: the model's last
  // site (an encoder-decoder's cross-attention; a model of one site, that one).
  std::string default_map_kind() const;
  // What an inspection's output is, for a caption: "output", "next-character guesses".
  std::string output_name() const;
  // Each batch of a split (in order, the run's batch size) through the model, handed to fn
  // inside the pass's scope (o.hooks' cache holds what they captured in this batch). What
  // looking inside needs of a split: losses under ablations, gradients of the loss with
  // respect to a hook's variables (record), activations' means over real positions.
  void for_each_batch(const PassOptions& o, const std::function<void(const BatchPass&)>& fn) const;
  // The tokens for_each_batch(o) puts through the model in all (both sides of a pair, padding
  // included): the size of one pass over those batches, counted without running it (the work
  // bounds of inspect/work.hpp).
  int64_t pass_tokens(const PassOptions& o) const;
  // The logits (T, V) float32 of one teacher-forced pass, with hooks (non-null) as a layer
  // inside the caller's: an encoder-decoder reads the source `input` and its decoder reads
  // tgt_in (an inspection's tgt_in); a language model reads `input` alone (tgt_in is ignored).
  // What patching runs: two inputs through the same output side.
  Tensor logits(const data::Ids& input, const data::Ids& tgt_in, nn::Hooks* hooks = nullptr) const;
  // The logits of one teacher-forced pass over a batch of B inputs, with hooks (non-null) as a
  // layer inside the caller's: input (B, S) int64 ids; an encoder-decoder's decoder reads tgt_in
  // (B, T) (required), a language model reads input alone (tgt_in ignored) -> (B, S, V); a
  // classifier -> (B, 1, C). float32 whatever the precision. input_valid (B, S) and tgt_valid
  // (B, T) bool, true on real positions, or undefined (every position real): rows of unequal
  // lengths padded at the end, masked as training masks its batches (padded keys), so a row's
  // activations at its real positions are those of the row alone, up to rounding. A shape,
  // dtype or id the model cannot read, or a row with no real position, throws qkv::Error naming
  // "forward". What the Python module's run_with_cache and run_with_hooks run (python/).
  Tensor batch_logits(const Tensor& input, const Tensor& tgt_in, nn::Hooks* hooks = nullptr,
                      const Tensor& input_valid = Tensor(),
                      const Tensor& tgt_valid = Tensor()) const;
  // The k most likely next tokens at each position of inspect(input)'s pass.
  std::vector<NextTokens> next_tokens(const Inspection& in, int64_t k) const;

  // --- for the family's passes (Family's calls over a loaded run)
  // The scope every call opens, with `hooks` (non-null) as the innermost layer over the calling
  // thread's; a cancellation point. A recording call (record) holds the Inference's tape lock.
  struct Call {
    std::unique_lock<std::recursive_mutex> tape;
    nn::InferenceScope scope;
  };
  std::unique_ptr<Call> call(bool record = false, nn::Hooks* hooks = nullptr) const;
  // The run's data read again from its config, once, by the first call that needs it (the
  // others wait for that read): what a loaded run may hold only the vocabularies of
  // (Family::needs_data), a language model's text. qkv::Error naming op when its vocabulary
  // differs from the run's (the data changed since training).
  const data::DataSplits& full_data(const char* op) const;

 private:
  LoadedRun run_;
  Precision precision_;
  int64_t max_input_ = 1024;
  // A recording pass's backward adds into the weights' .grad(), which every such pass shares:
  // they take turns (recursive: a recording call may make calls of its own).
  mutable std::recursive_mutex tape_mu_;
  mutable std::mutex data_mu_;  // data_
  mutable std::shared_ptr<const data::DataSplits> data_;
};

// ids as one row (1, n) int64.
Tensor row_of(const data::Ids& ids);
// qkv::Error naming "forward" unless ids is (B, n) int64 with B >= 1 and 1 <= n <= max_len
// (what: "input", "decoder input"): batch_logits' check of what a caller hands it.
void check_batch_ids(const Tensor& ids, int64_t max_len, const char* what);
// (B, n) bool, all true: every position of a batch real.
Tensor all_real(const Tensor& ids);
// qkv::Error naming "forward" unless valid is undefined or (B, n) bool like ids with a real
// position in every row (what: "input", "decoder input"): batch_logits' check of its masks.
void check_batch_valid(const Tensor& valid, const Tensor& ids, const char* what);
// valid when defined, else all_real(ids).
Tensor valid_or_all(const Tensor& valid, const Tensor& ids);
// Ids as labels for an axis: SentencePiece's word-start mark U+2581 as "_", a character
// model's space as "_" and line break as "\n".
std::vector<std::string> token_labels(const data::Ids& ids, const data::Vocab& v);
// The labels of one pass's positions, by side (nn::Side): the input's, and the output side's
// as queries (the labels: output + <eos>) and as keys (the decoder's input: <bos> + output). A
// language model's three are its text's.
struct PassLabels {
  std::vector<std::string> input, output_queries, output_keys;
};
// Every attention site of model, in order, as a view of the patterns `captured` holds from one
// pass (pattern_capture: each layer's (1, h, n, m)), its axes labelled by its queries' and keys'
// sides; qkv::Error when a pattern is missing. How every family's inspect builds its views.
std::vector<AttentionView> views_of(const nn::Model& model, const nn::Hooks& captured,
                                    const PassLabels& labels);
// A hook layer capturing every attention pattern ("*.pattern").
nn::Hooks pattern_capture();

// A split of r's synthetic task (copy, reverse, sort, dyck, ...) regenerated at lengths
// min_len..max_len with the run's seeds, so only the lengths change (eval --max-len); qkv::Error
// for a task of fixed lengths or text, or min_len above max_len.
data::DataSplits regenerated(const LoadedRun& r, int64_t min_len, int64_t max_len);
// A scored split's summary, after "(checkpoint, valid split": ", 500 examples" and, for a split
// regenerated at other lengths (max_len > 0), ", lengths 1..14".
std::string examples_summary(int64_t examples, int64_t min_len, int64_t max_len);

struct OpenOptions {
  std::string checkpoint = "best";     // best | latest | average | step-N | a checkpoint's path
  std::optional<Precision> precision;  // fp32 | bf16 | auto; unset: the run's config
  // > 0: compute threads; 0: the run's config; < 0: leave the process's setting alone
  int threads = 0;
  const char* op = "inference";  // the command, for messages
  // The longest input encode accepts (--max-input): an encoder-decoder's decoding time grows
  // with the square of its input, so a runaway line is refused up front. A language model's
  // context bounds its inputs anyway.
  int64_t max_input = 1024;
};

// The run's checkpoint loaded, in an Inference.
std::unique_ptr<Inference> open_inference(const std::string& run_dir, const OpenOptions& o = {});

}  // namespace qkv::run
