// Language-model data ([data] task = "lm"), as nanoGPT's shakespeare_char: one text file
// (plain or gzip), character tokens, the first 90% for training and the last 10% for
// validation, and batches of block_size windows at random offsets.
//
// The vocabulary is every distinct character (Unicode code point) of the whole file, sorted
// by code point, with no specials: ids are 0 .. V-1 (65 for tiny Shakespeare, as nanoGPT).
// With tokenizer = "sentencepiece" it is a SentencePiece model's pieces instead (see below).
//
// A batch (lm_batch) holds B windows of block_size + 1 tokens starting at the given offsets:
// tgt_in = window[:-1], tgt_out = window[1:] (the next-token labels), both (B, block_size);
// no source, no padding (src and the masks are undefined), every label counts.
#pragma once
#include <memory>
#include <string>

#include "data/loader.hpp"
#include "data/sentencepiece.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

struct LmOptions {
  TokenizerKind tokenizer = TokenizerKind::chars;  // chars | sentencepiece
  SentencePieceOptions spm;  // sentencepiece: trained on the training part's lines
  std::string spm_model;     // sentencepiece: a saved .model to load instead, when the file exists
};

struct LmCorpus {
  Ids train, valid;  // token streams
  Vocab vocab;
  std::shared_ptr<const SentencePiece> spm;  // sentencepiece only
};

// char: as above. sentencepiece: the text is split at the first line break at or after 90% of
// its characters; the model is trained on the training lines only; each line is encoded into
// pieces followed by <eos>, which stands for the line break (SentencePiece itself drops
// newlines, and collapses runs of spaces as its nmt_nfkc normalization does).
LmCorpus load_lm_corpus(const std::string& path, const LmOptions& o);
inline LmCorpus load_lm_corpus(const std::string& path, TokenizerKind tokenizer) {
  LmOptions o;
  o.tokenizer = tokenizer;
  return load_lm_corpus(path, o);
}
// text -> ids of a char vocabulary; a character outside it throws qkv::Error naming each one.
Ids encode_chars(const std::string& text, const Vocab& vocab, const char* op);
// text -> ids as the corpus was encoded: characters (spm null), or SentencePiece pieces line by
// line with <eos> for each line break.
Ids encode_lm_text(const std::string& text, const Vocab& vocab, const SentencePiece* spm,
                   const char* op);

// Model output back to text one token at a time (for streaming): a character as itself; a
// piece with its word-start mark as a space (none at the start of a line), <eos> as a line break.
class LmDetokenizer {
 public:
  LmDetokenizer(const Vocab& vocab, bool sentencepiece, bool line_start = true);
  std::string next(int64_t id);

 private:
  const Vocab& vocab_;
  bool spm_, line_start_;
};

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
