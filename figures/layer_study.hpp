// The lesson's table "Recurrence vs. convolution vs. self-attention" measured (qkv layers): one
// layer of each kind at equal width d, timed forward + backward over sequence lengths n, its
// FLOPs counted, its sequential steps stated, and its path length made visible as gradient
// norms. Lives in figures/ because it is a study over nn's modules that draws charts (figures
// depends on nn; nothing below needs run/ or a trained model), as attention_stats is for
// qkv saturation.
//
// The layers (one each, width d, batch B, input x: (B, n, d) -> (B, n, d)):
//   attention  a Transformer encoder block with attention alone (BlockConfig::attn_only, no
//              FFN): x <- LayerNorm(x + MHA(x, x, x)), `heads` heads, no mask, dropout 0
//   gru        nn::GRU(d, d), ONE direction (forward in time): out_t sees x_0 .. x_t
//   lstm       nn::LSTM(d, d), one direction
//   conv       nn::ConvStack of `conv_layers` layers, kernel w, no dilation, "same" padding
//              unless conv_causal: x <- LayerNorm(x + relu(conv(x))) per layer
//
// FLOPs (forward, matrix products only, a multiply-add = 2, per sequence; the backward is
// about twice this; elementwise work, softmax and norms are left out):
//   attention  8 n d^2 + 4 n^2 d     (q, k, v, o projections; q k^T and weights v)
//   gru        12 n d^2              (3 gates: x W_ih^T and h W_hh^T at every step)
//   lstm       16 n d^2              (4 gates)
//   conv       2 w n d^2 per layer   (L layers: 2 L w n d^2)
// Sequential steps: n for the recurrences (step t needs h_{t-1}), 1 for attention and conv.
// This is structural, a property of the computation graph, stated here, not measured.
//
// Path length at initialisation (training each encoder first is a later step): for position
// j = n - 1 and a fixed random unit vector u, the gradient of s = sum_b u . out[b, j] with
// respect to x[b, i], its L2 norm averaged over the batch, for every i: one backward pass on
// the tape. A position out of reach of j gets exactly 0.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/var.hpp"
#include "core/random.hpp"
#include "figures/plot.hpp"

namespace qkv::figures {

enum class LayerKind { attention, gru, lstm, conv };
const char* layer_name(LayerKind k);
std::vector<LayerKind> all_layer_kinds();

struct LayerStudyOptions {
  int64_t d = 64;                // width of every layer
  int64_t heads = 4;             // attention's heads
  int64_t kernel = 3;            // conv's w
  int64_t conv_layers = 1;       // conv's L
  bool conv_causal = false;      // conv's padding: causal (all on the left) or "same"
  int64_t batch = 8;             // B, for the timings
  int64_t repeats = 5;           // timed forward + backward passes per (layer, n); median
  std::vector<int64_t> lengths;  // n
  int64_t profile_length = 64;   // n of the gradient-norm profile
  int64_t profile_batch = 4;     // B of the profile
  uint64_t seed = 1;
};

// Forward FLOPs of one sequence through the layer (the formulas above), exact integers.
int64_t layer_flops(LayerKind k, int64_t n, const LayerStudyOptions& o);
// n for the recurrences, 1 otherwise (structural).
int64_t sequential_steps(LayerKind k, int64_t n);

// Median seconds of forward + backward (output gradient all ones) of one batch of (B, n, d),
// after one untimed warm-up pass.
double time_forward_backward(LayerKind k, int64_t n, const LayerStudyOptions& o);

// norms[i] = mean over the batch of || d (u . out[b, n-1]) / d x[b, i] ||, i = 0 .. n - 1.
std::vector<double> gradient_profile(LayerKind k, int64_t n, const LayerStudyOptions& o);

// The same for any out (B, n, d_out) on the tape of the leaf x (B, n, d): u a unit vector drawn
// from g (randn of d_out, normalised), seeded at position n - 1 of every row, one backward;
// norms[i] for i = 0 .. n - 1. length_study.cpp takes it through a trained encoder.
std::vector<double> last_position_profile(const ag::Var& out, const ag::Var& x, Generator& g);

// Least-squares slope of log y against log x (at least two points, all > 0).
double loglog_slope(const std::vector<double>& x, const std::vector<double>& y);

struct LayerResult {
  LayerKind kind;
  std::vector<int64_t> n;
  std::vector<double> seconds;  // per n: median forward + backward of one batch
  std::vector<int64_t> flops;   // per n: forward FLOPs per sequence
  std::vector<int64_t> steps;   // per n: sequential steps
  double exponent = 0;          // slope of log seconds on log n over the larger half of n
  std::vector<double> profile;  // gradient norm at distance |i - j| = 0, 1, ..., from j = n - 1
};

// Every layer over every n, and each one's profile. Prints nothing.
std::vector<LayerResult> run_layer_study(const LayerStudyOptions& o);

// layers.json: the settings, and per layer its name, n, seconds, flops, steps, exponent and
// profile (index = distance from j = n - 1).
nlohmann::ordered_json layer_study_json(const std::vector<LayerResult>& r,
                                        const LayerStudyOptions& o);

// The lesson's columns with the measured numbers, as text.
std::string layer_table(const std::vector<LayerResult>& r, const LayerStudyOptions& o);

// The two figures' charts from layers.json (layer_study_json): time (seconds against n,
// log-log) and path (gradient norm against distance, log y; zeros are left off the log axis),
// one series per layer labelled prefix + its name. qkv report overlays several folders' series.
struct LayerCharts {
  LineChart time, path;
};
LayerCharts layer_charts(const nlohmann::json& layers_json, const std::string& prefix = "");

// layer_charts as time.svg and path.svg in dir.
void write_layer_figures(const std::string& dir, const std::vector<LayerResult>& r,
                         const LayerStudyOptions& o);

}  // namespace qkv::figures
