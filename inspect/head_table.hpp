// Which heads matter and what each does: one row per head of every attention of a trained run
// (`qkv heads`).
//
//   importance        mean over the split's batches of |dL/dxi_h|, xi_h = 1 a mask variable
//                     multiplying head h's output z (Michel, Levy and Neubig 2019, "Are Sixteen
//                     Heads Really Better than One?", eq. 2, with the expectation over batches)
//   zero_loss_change  the split's loss with the head's z set to 0, minus the loss
//   mean_loss_change  the split's loss with the head's z replaced by its mean over the split's
//                     real positions, minus the loss
//   then every score of the registry (interp/head_scores.hpp, QKV_HEAD_SCORES) meant for the
//   head's attention, measured on
//     self-attention:  repeated random token sequences (interp/repeated_tokens.hpp) fed as the
//                      input (an encoder-decoder's decoder self-attention: on the decoder's
//                      input for those sources, the model's own greedy output)
//     cross-attention: the split's first examples
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "data/config.hpp"
#include "inspect/heads.hpp"

namespace qkv::inspect {

struct HeadRow {
  std::string attention;  // "self", "encoder", "decoder" or "cross"
  std::string name;       // as --ablate names it: "1.3", "cross.0.2"
  int64_t layer = 0, head = 0;
  double importance = 0, zero_loss_change = 0, mean_loss_change = 0;
  std::map<std::string, double> scores;  // the registry's scores of its attention's kind
};

struct HeadTableOptions {
  std::string split = "valid";
  int64_t max_batches = 4;   // of the split, for the losses, importance and means (0: all)
  int64_t probes = 4;        // repeated-token sequences, and split examples for alignment
  int64_t probe_length = 0;  // the repeated half L; 0: up to 16, within the model's positions
  uint64_t seed = 1;         // the probes' tokens
};

struct HeadTable {
  std::string split;
  double loss = 0;  // the split's loss (over the batches used), nats per token
  int64_t batches = 0, probe_length = 0;
  std::vector<Attention> sites;  // the model's attention sites, in forward order
  std::vector<HeadRow> rows;     // every attention's heads, layer by layer
};

// Everything above, under the calling thread's hooks (an ablation in scope stays in place, and
// the table's own hooks compose inside it).
HeadTable head_table(const run::Inference& inf, const HeadTableOptions& o);

// A column of the table: its own three (importance, zero_loss_change, mean_loss_change), then
// every score of the registry (interp/head_scores.hpp, QKV_HEAD_SCORES) in the registry's
// order. What `qkv heads` prints, its JSON and the page's head panels are built from this list.
struct HeadColumn {
  std::string name;           // the JSON key and the text table's header: "previous_token"
  std::string title;          // a few words for captions: "previous token"
  std::string unit;           // "nats per token", "nats", "share of attention"
  std::optional<double> max;  // the largest value the unit allows (a share: 1); none: unbounded
  int decimals = 4;           // digits after the point in the text table and on the page
  std::string attention;      // which attentions have it: "any", "self" or "cross"
  bool probe = false;         // the training's [probe] records it (inspect/probe_hook.hpp)
  std::string description;    // one line
};
const std::vector<HeadColumn>& head_columns();
// A row's numbers by column, in the columns' order (a row has the scores of its attention).
std::vector<std::pair<const HeadColumn*, double>> head_values(const HeadRow& r);
// The columns as the JSON says them: [{"name", "title", "unit", "max" (when bounded),
// "decimals", "attention", "probe", "description"} ...], in order.
nlohmann::json head_columns_json();
// The table as `qkv heads --json` prints it and `qkv serve` answers it:
// {"split", "loss", "batches", "probe_length", "columns": head_columns_json(),
//  "heads": [{"attention", "head", "layer", "index", <each column of the row>: number} ...]}
nlohmann::json head_table_json(const HeadTable& t);
// The inputs of the pattern scores, fixed by the options (probes, probe_length, seed, split):
// what `qkv heads` and the training probe (inspect/probe_hook.hpp) read.
struct PatternProbe {
  int64_t length = 0;               // L, the repeated half
  std::vector<data::Ids> repeated;  // self-attention: `probes` rows r + r of 2 L tokens
  std::vector<data::Ids> sources;   // cross-attention: the split's first `probes` sources
};
// For a model of config c over data d (its vocabularies, split and the family's length rules).
// qkv::Error naming key when L does not fit the model's positions (config::check_probe_length:
// an encoder-decoder's greedy decode of the 2 L tokens must fit as well); key: what set the
// length ("probe.length"), or the command whose automatic length found no room.
PatternProbe pattern_probe(const config::RunConfig& c, const data::DataSplits& d,
                           const nn::Model& model, const HeadTableOptions& o,
                           const std::string& key = "heads");

// One attention's pattern scores: score name -> (layers) x (heads), each the mean over the
// probe's inputs (repeated rows for self-attention, sources for cross-attention).
struct AttentionScores {
  Attention attention;
  std::map<std::string, std::vector<std::vector<double>>> scores;
};
// Every attention's scores on probe (the registry's scores of its kind), in forward order, each
// input inspected as the run's Family inspects it. On a model of config c and data d (the training
// probe): runs in the caller's InferenceScope (eval mode, no tape, precision). Both forms run
// under the calling thread's hooks (an ablation stays in place).
std::vector<AttentionScores> pattern_scores(const nn::Model& model, const config::RunConfig& c,
                                            const data::DataSplits& d, const PatternProbe& probe);
// On a trained run: each input through Inference::inspect (its scope, its lock).
std::vector<AttentionScores> pattern_scores(const run::Inference& inf, const PatternProbe& probe);

// The split's mean loss per token, with hooks (non-null) as a layer inside the caller's; and the
// batches.
std::pair<double, int64_t> split_loss(const run::Inference& inf, const std::string& split,
                                      int64_t max_batches, nn::Hooks* hooks = nullptr);

// Michel et al.'s importance of every head: z hook point -> (h) mean |dL/dxi|.
std::map<std::string, std::vector<double>> head_importance(const run::Inference& inf,
                                                           const std::vector<Attention>& attentions,
                                                           const std::string& split,
                                                           int64_t max_batches);

}  // namespace qkv::inspect
