// Language models (model.kind = "decoder", data.task = "lm"): nanoGPT's loss estimate, and
// sampling text with or without the key/value cache (qkv generate).
#pragma once
#include <cstdint>
#include <functional>

#include "core/random.hpp"
#include "data/dataset.hpp"
#include "nn/decoder_lm.hpp"

namespace qkv::run {

// nanoGPT's estimate_loss for one split: the mean cross-entropy of `iters` batches of
// batch_size windows at random offsets drawn from gen, in eval mode, without recording.
double lm_loss_estimate(const nn::DecoderLM& model, const data::Ids& tokens, int64_t block_size,
                        int64_t batch_size, int64_t iters, Generator& gen);

// The mean cross-entropy over a whole token stream, cut into consecutive windows of
// block_size (each token is predicted once, with 0 .. block_size - 1 tokens of context, as in
// training), batch_size windows at a time: exact and deterministic, unlike the estimate.
struct LmLoss {
  double loss = 0;
  int64_t tokens = 0, windows = 0;
};
LmLoss lm_loss_full(const nn::DecoderLM& model, const data::Ids& tokens, int64_t block_size,
                    int64_t batch_size);

struct SampleOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // > 0: keep the k most likely tokens
  double top_p = 1.0;        // < 1: keep the smallest set whose probability reaches top_p
};
// Throws qkv::Error (one line naming the option) on temperature < 0, top_k < 0, or top_p
// outside (0, 1].
void validate(const SampleOptions& o);

// One token from logits (V): greedy at temperature 0, else softmax(logits / T) restricted to
// top-k then top-p (renormalised) and sampled with one draw of gen.
int64_t sample_token(const Tensor& logits, const SampleOptions& o, Generator& gen);

// Continues prompt (ids, non-empty) by n tokens, calling on_token with each as it is made.
// The context is at most `context` tokens (the run's block_size, and at most the learned
// positions): when it is full, the oldest half is dropped and the newest context / 2 tokens
// are read again in one pass. cached: each other token costs one position's work (the
// key/value cache); uncached: every token re-reads the whole context (the reference, and
// nanoGPT's way). Both see the same context at every step, so they give the same tokens.
void generate(const nn::DecoderLM& lm, const data::Ids& prompt, int64_t n, int64_t context,
              const SampleOptions& o, Generator& gen, bool cached,
              const std::function<void(int64_t)>& on_token);

}  // namespace qkv::run
