// Language-model data ([data] task = "lm"), as nanoGPT's shakespeare_char: one text file
// (plain or gzip), character tokens, the first 90% for training and the last 10% for
// validation, and batches of block_size windows at random offsets.
//
// The vocabulary is every distinct character (Unicode code point) of the whole file, sorted
// by code point, with no specials: ids are 0 .. V-1 (65 for tiny Shakespeare, as nanoGPT).
//
// A batch (lm_batch) holds B windows of block_size + 1 tokens starting at the given offsets:
// tgt_in = window[:-1], tgt_out = window[1:] (the next-token labels), both (B, block_size);
// no source, no padding (src and the masks are undefined), every label counts.
#pragma once
#include <memory>
#include <string>

#include "data/loader.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

struct LmCorpus {
  Ids train, valid;  // token streams
  Vocab vocab;
};

// tokenizer: "char" (SentencePiece is not supported for language modelling yet: an error).
LmCorpus load_lm_corpus(const std::string& path, const std::string& tokenizer);
// text -> ids of a char vocabulary; a character outside it throws qkv::Error naming each one.
Ids encode_chars(const std::string& text, const Vocab& vocab, const char* op);

// Offsets of batch windows: batch_size draws uniform in [0, n - block_size - 1].
std::vector<int64_t> lm_offsets(int64_t n, int64_t block_size, int64_t batch_size, Generator& g);
Batch lm_batch(const Ids& tokens, const std::vector<int64_t>& offsets, int64_t block_size);

// An endless stream of training batches at seeded random offsets. The state is the number of
// batches drawn (index) and the generator's position, so restore() resumes exactly. Sharded
// (data-parallel), every process draws the same global batch and keeps its rows
// (shard_indices); the global counts are in Batch::global_*.
class LmLoader : public BatchSource {
 public:
  LmLoader(std::shared_ptr<const Ids> tokens, int64_t block_size, int64_t batch_size, uint64_t seed,
           int64_t shard_rank = 0, int64_t shard_count = 1);
  Batch next() override;
  LoaderState state() const override { return state_; }
  void restore(const LoaderState& s) override;

 private:
  std::shared_ptr<const Ids> tokens_;
  int64_t block_, batch_, rank_, count_;
  Generator gen_;
  LoaderState state_;
};

}  // namespace qkv::data
