// The probe input of the self-attention head scores (interp/head_scores.hpp): repeated random
// token sequences, on which an induction head has something to complete and a duplicate-token
// head something to find.
//
// As the induction-head exercises built on TransformerLens draw them (generate_repeated_tokens
// of ARENA's "Intro to Mech Interp", chapter 1.2): each row is [bos] + r + r, r a sequence of
// `length` tokens drawn independently and uniformly, there from range(d_vocab), here from the
// ids 0..vocab-1 other than the special ones (padding, <bos>, <eos>, <unk>: a model never sees
// them inside a text). Tokens may repeat within r, as they do there; the scores count those
// copies too.
#pragma once
#include <cstdint>
#include <vector>

#include "core/random.hpp"
#include "core/tensor.hpp"

namespace qkv::interp {

struct RepeatedTokens {
  int64_t batch = 1;
  int64_t length = 1;               // L, the length of r
  int64_t vocab = 0;                // token ids are 0..vocab-1
  std::vector<int64_t> specials{};  // ids never drawn
  int64_t bos = -1;                 // the first token of every row; -1: none (rows are r + r)
};

// (batch, [1 +] 2 L) int64, drawn from g (the same generator state gives the same tokens).
// Throws qkv::Error when nothing is left to draw from, or a size is not positive.
Tensor repeated_tokens(const RepeatedTokens& spec, Generator& g);

}  // namespace qkv::interp
