// The in-context-learning score of a language model: how much lower its loss is late in a
// context than early in it.
//
// Olsson et al. 2022 ("In-context Learning and Induction Heads", Transformer Circuits Thread,
// section "Key Concepts", in-context learning score): "the loss of the 500th token in the
// context minus the average loss of the 50th token in the context, averaged over dataset
// examples". Their contexts are 512 tokens or more; a model here reads n = data.block_size
// tokens, so the two positions become the end of the context and a tenth of the way in, each
// averaged over a small neighbourhood of k = max(1, n / 16) positions (a single position's
// loss over a few windows is noisy):
//
//   late   positions n - k .. n - 1           (the last k: 0-based, the loss of predicting the
//                                              token after position t from t + 1 tokens)
//   early  positions e .. e + k - 1, e = max(0, n / 10 - k / 2)
//   icl    mean loss over late - mean loss over early, in nats
//
// each position's loss being its mean cross-entropy over a fixed set of validation windows
// (icl_windows: W windows of n + 1 tokens at evenly spaced offsets of the validation text).
// Negative: the model predicts better with more context. For n = 64 (shakespeare-char):
// k = 4, late = 60..63, early = 4..7; for n = 256: k = 16, late = 240..255, early = 17..32.
// The score is a mean over W k tokens on each side: with few windows it is noisy (a few
// hundredths of a nat and more), so read its trend over the probes, not one value.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"

namespace qkv::nn {
class Model;
}

namespace qkv::inspect {

struct IclPositions {
  int64_t early = 0, late = 0, width = 1;  // the first early and late positions, and k
};
// The positions of a context of n >= 2 tokens (above). qkv::Error when n < 2.
IclPositions icl_positions(int64_t n);

// Each position's mean cross-entropy over the windows, in nats: logits (W, n, V) and labels
// (W, n) int64 -> (n) values, computed in float64.
std::vector<double> position_losses(const Tensor& logits, const Tensor& labels);

// mean(losses[late .. late + width)) - mean(losses[early .. early + width)).
double icl_score(const std::vector<double>& losses);

// W windows of n + 1 tokens at evenly spaced offsets of tokens, the first at 0 and the last
// ending at the end (one window: at 0). qkv::Error naming op when tokens holds fewer than n + 1.
data::Batch icl_windows(const data::Ids& tokens, int64_t n, int64_t windows, const char* op);

// The score of a next-token model on those windows (the family that gave the text,
// run::Family::icl_text, reads them as its decoder's input): one forward pass, in the caller's
// scope (eval mode, no tape, precision).
double icl_score(const nn::Model& model, const data::Batch& windows);

}  // namespace qkv::inspect
