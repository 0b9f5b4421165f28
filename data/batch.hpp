// Batches: padding, key-padding masks, shifted targets, and the plan that groups examples into
// batches (shuffling, bucketing by length, a maximum-tokens cap).
#pragma once
#include <cstdint>
#include <vector>

#include "core/random.hpp"
#include "core/tensor.hpp"
#include "data/dataset.hpp"

namespace qkv::data {

// What the model consumes. B rows, S = longest source, T = longest framed target in the batch.
// Masks follow the library's convention "true = may attend": true on real tokens.
struct Batch {
  Tensor src;                    // (B, S) int64, 0-padded
  Tensor src_mask;               // (B, S) bool, true on real source tokens
  Tensor tgt_in;                 // (B, T) int64: <bos> y (decoder input), 0-padded
  Tensor tgt_out;                // (B, T) int64: y <eos> (labels), 0-padded
  Tensor tgt_mask;               // (B, T) bool, true on real positions of tgt_in / tgt_out
  int64_t src_tokens = 0;        // real tokens in src
  int64_t tgt_tokens = 0;        // real tokens in tgt_out (the loss normaliser)
  std::vector<int64_t> indices;  // row r is example indices[r] of the dataset
  // The whole global batch this one is a shard of (Loader with shard_count > 1); equal to
  // size(), src_tokens and tgt_tokens for an unsharded batch. Data-parallel training
  // normalises the loss by global_tgt_tokens so the ranks' gradients sum to the global one.
  int64_t global_size = 0;
  int64_t global_src_tokens = 0;
  int64_t global_tgt_tokens = 0;
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

// Builds the batch of the given examples, in that row order. Errors (qkv::Error naming the
// dataset and example) on an index out of range, an empty source, a negative id, or an empty
// framed target.
Batch make_batch(const Dataset& ds, const std::vector<int64_t>& indices, const Framing& f);

struct BatchOptions {
  int64_t batch_size = 32;  // most examples per batch
  int64_t max_tokens = 0;   // > 0: rows * max(S, T) of a batch stays <= this (0 = no cap)
  bool shuffle = true;      // shuffle examples (and, when bucketing, batches) from the generator
  bool bucket = true;       // sort by length within pools of bucket_pool batches
  int64_t bucket_pool = 50;
};

using Plan = std::vector<std::vector<int64_t>>;  // example indices of each batch, in order

// One epoch's batches. Shuffle -> pools of bucket_pool * batch_size examples sorted by
// (source, target) length -> greedy cut into batches under batch_size and max_tokens -> the
// batches shuffled (when bucketing and shuffling). An example that alone exceeds max_tokens
// is a batch of its own. Draws from g only when shuffling, so g's position is the RNG state.
Plan plan_batches(const Dataset& ds, const Framing& f, const BatchOptions& o, Generator& g);

// Real tokens and padded slots over the src and tgt_in matrices of a plan's batches.
struct PaddingStats {
  int64_t real = 0;
  int64_t slots = 0;
  double fraction() const {  // share of slots that are padding
    return slots == 0 ? 0.0 : 1.0 - static_cast<double>(real) / static_cast<double>(slots);
  }
};
PaddingStats padding_stats(const Dataset& ds, const Plan& plan, const Framing& f);

}  // namespace qkv::data
