// A pass of a trained run's model on an autograd tape, for gradients at its embeddings and hook
// points: what `qkv attribute`'s gradient methods and `qkv patch --approx` take their
// gradients through. The pass reads its ids as Inference::logits reads them (one input, and an
// encoder-decoder's decoder input), repeated as a batch of copies; call it inside an
// nn::InferenceScope that records, then ag::grad with a seed from logit_seed. ag::grad writes
// no weight's .grad(), so concurrent callers share nothing.
#pragma once
#include <cstdint>

#include "autograd/var.hpp"
#include "data/dataset.hpp"

namespace qkv::nn {
class Model;
}

namespace qkv::inspect {

// One pass's ids by the model's sides: an encoder-decoder reads src and its decoder tgt; a
// language model reads tgt alone (src empty); an encoder classifier src alone (tgt empty).
struct PassIds {
  data::Ids src, tgt;
  bool pair() const { return !src.empty() && !tgt.empty(); }
};

// The ids Inference::logits(input, tgt_in) reads, by the model's attention sites (a language
// model ignores tgt_in, a classifier has no output side).
PassIds pass_ids(const nn::Model& model, const data::Ids& input, const data::Ids& tgt_in);

// The logits (copies, T, V) of model.forward over `copies` copies of the pass, as
// Inference::logits forms them (an encoder-decoder's masks all true; the other families' none).
ag::Var forward_copies(const nn::Model& model, const PassIds& ids, int64_t copies);

// The seed for ag::grad of f = logit[row, a] - logit[row, b] summed over the copies (b < 0: the
// logit alone): logits' shape (copies, T, V) and dtype, +1 at (k, row, a), -1 at (k, row, b).
Tensor logit_seed(const ag::Var& logits, int64_t row, int64_t a, int64_t b);

}  // namespace qkv::inspect
