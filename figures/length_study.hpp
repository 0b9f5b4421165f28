// The second half of qkv layers: each kind of encoder trained on copy and reverse with the same
// budget of steps, then scored by exact match at growing lengths, past the training lengths
// too, with the recurrent encoder-decoder without attention as the bottleneck baseline. Also the
// path length after training: the same gradient-norm profile as layer_study.hpp's, taken
// through each trained model's encoder.
//
// The models (every one d wide, `layers` encoder layers, one decoder layer, dropout 0):
//   attention         the Transformer: attention encoder and decoder, sinusoidal positions
//   gru, lstm, conv   that encoder (nn/sequence_encoder.hpp) under the Transformer's decoder,
//                     which reads it through dot-product cross-attention; sinusoidal positions
//   gru-no-attention  Cho et al. (2014): a GRU encoder-decoder, the decoder reads one fixed
//                     context, the encoder's final states (nn/rnn_seq2seq.hpp)
//   bahdanau          the same with Bahdanau et al.'s (2015) additive attention
// Training is `qkv train`'s step (model, loader, Adam, warmup then cosine, clipping), in memory,
// no run folder: `steps` optimizer steps of `batch` examples of lengths 1 .. train_max_len.
//
// Exact match at length n: the greedy decodes of `eval_examples` fresh sources of exactly n
// symbols equal to their targets (run/decode.hpp's evaluate, the family's decode-length rule).
//
// Path profile of a model (before and after training): the encoder's input embeddings
// (hook point encoder.embed) as a leaf, sources of profile_length symbols; for j = n - 1 and a
// fixed random unit vector u, the L2 norm of d (u . memory[b, j]) / d embed[b, i], averaged over
// the batch; index = distance |i - j|. A bidirectional encoder's j sees both directions.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "figures/plot.hpp"

namespace qkv::figures {

struct LengthStudyOptions {
  std::vector<std::string> models = {"attention",        "gru",     "lstm", "conv",
                                     "gru-no-attention", "bahdanau"};
  std::vector<std::string> tasks = {"copy", "reverse"};
  int64_t d = 64, heads = 4, layers = 2;
  int64_t steps = 1000;  // optimizer steps per (model, task); 0: no study
  int64_t batch = 32;
  int64_t vocab = 10;          // symbols
  int64_t train_max_len = 10;  // training lengths 1 .. this
  std::vector<int64_t> eval_lengths = {2, 4, 6, 8, 10, 12, 14, 16, 20, 30};
  int64_t eval_examples = 100;
  double lr = 1e-3;
  int64_t warmup = 100;
  int64_t profile_length = 10;  // n of the before/after-training profiles
  int64_t profile_batch = 4;
  uint64_t seed = 1;
};

// Every model the study knows: "attention", "gru", "lstm", "conv", "gru-no-attention",
// "bahdanau".
std::vector<std::string> length_study_models();

struct LengthCurve {
  std::string model, task;
  std::vector<int64_t> n;
  std::vector<double> exact_match;  // per n
  double final_loss = 0;            // mean training loss of the last tenth of the steps
  double seconds = 0;               // training and evaluation
  int64_t parameters = 0;
  std::vector<double> profile_init, profile_trained;  // index = distance from j = n - 1
};

// Refuses, in one line naming the option, an unknown model or task (with the valid names),
// lengths below 1, and sizes that do not divide.
void check_length_study(const LengthStudyOptions& o);
// Every model on every task (models outer). Prints one line per pair to stderr as it goes.
std::vector<LengthCurve> run_length_study(const LengthStudyOptions& o);

// layers.json's "training": the settings and one record per (model, task).
nlohmann::ordered_json length_study_json(const std::vector<LengthCurve>& r,
                                         const LengthStudyOptions& o);
// The table: exact match per model and length, one block per task; lengths past training marked.
std::string length_table(const std::vector<LengthCurve>& r, const LengthStudyOptions& o);

// From layers.json's "training" (length_study_json): exact match against n, one chart per task,
// and the after-training path profiles of the first task (with the init profile of each).
struct LengthCharts {
  std::vector<LineChart> exact;  // one per task, in the JSON's order
  LineChart path;
};
LengthCharts length_charts(const nlohmann::json& training, const std::string& prefix = "");
// exact_match_<task>.svg per task and path_trained.svg in dir.
void write_length_figures(const std::string& dir, const std::vector<LengthCurve>& r,
                          const LengthStudyOptions& o);

}  // namespace qkv::figures
