// Where the answer forms: the logit lens (nostalgebraist 2020, "interpreting GPT: the logit
// lens"; TransformerLens's accumulated_resid): the residual stream after each block -- and the
// embedding, the first block's input -- read through the model's final norm and output layer,
// as if the blocks after it were not there. At the last block it is the model's own logits.
//
// The stream read is the one the model's output layer reads (nn::Model::output_stream: a
// language model's blocks, an encoder-decoder's decoder, an encoder classifier's blocks), at the
// last position the output layer reads in the pass inspect() makes of the input (a language
// model: the input; an encoder-decoder: the decoder reading <bos> and its greedy output; an
// encoder classifier: its pooled position, so each layer gives class logits), or at a chosen
// one of that pass's positions (an encoder-decoder's last reads <eos> after the output: an
// earlier one shows where one output word forms).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.hpp"
#include "data/dataset.hpp"
#include "nn/hooks.hpp"

namespace qkv::run {
class Inference;
}

namespace qkv::inspect {

struct Attribution;  // inspect/attribution.hpp

struct LensLayer {
  std::string name;                                 // "embed", then "0", "1", ...: after block L
  std::string hook;                                 // the hook point read
  std::vector<std::pair<std::string, double>> top;  // (token, probability), most likely first
  int64_t rank = 0;        // of the final prediction among the lens's logits (0: the top)
  double probability = 0;  // of the final prediction
  Tensor logits;           // (T, V) float32, every position
};

struct Lens {
  std::string prediction;  // the model's own most likely next token at the last position
  int64_t prediction_id = 0;
  std::string position;  // the position's label (the token read there)
  int64_t index = 0;     // the position, from 0
  Tensor logits;         // the model's (T, V)
  std::vector<LensLayer> layers;
};

// The lens of one input, the k most likely tokens per layer, at `position` of the pass (-1: the
// last; qkv::Error naming "lens" past the pass's positions, or for a model whose output layer
// reads no blocks' stream: a recurrent decoder). Under the calling thread's hooks.
Lens logit_lens(const run::Inference& inf, const data::Ids& input, int64_t k = 5,
                int64_t position = -1);

// The lens (and a target's attribution, when given) as `qkv lens --json` prints it and
// `qkv serve` answers it: {"position", "index", "prediction", "layers": [{"layer", "hook", "rank",
// "probability", "top": [{"token", "probability"}...]}...], "attribution": {"target", "logit",
// "parts": [{"part", "logit"}...]}} (attribution only with parts).
nlohmann::json lens_json(const Lens& lens, const Attribution* parts = nullptr);

}  // namespace qkv::inspect
