// Subword regularization for parallel corpora (data.spm_alpha; Kudo 2018, "Subword
// Regularization", and BPE-dropout, Provilkov et al. 2020): every epoch sees the training pairs
// segmented afresh, each side drawn from its SentencePiece model (SentencePiece::sample), so the
// model learns from many segmentations of each word instead of the one best. Validation, test
// and decoding keep the best segmentation.
//
// Epoch e's examples come from seeds derived from (seed, e) alone: the same run gives the same
// examples whichever thread draws them, and a resumed run draws the epoch it stopped in again.
#pragma once
#include <cstdint>
#include <memory>

#include "data/config.hpp"
#include "data/dataset.hpp"

namespace qkv::data {

class SubwordSampler {
 public:
  // d: the run's splits, tokenized by SentencePiece (d.train keeps its text); alpha in (0, 1].
  // A drawn pair with a side longer than the longest side of d.train's best segmentations keeps
  // its best segmentation instead, so no batch needs more positions than the run checked for
  // (and data.max_seq_len still bounds every side).
  SubwordSampler(const DataSplits& d, double alpha, uint64_t seed);

  // Epoch e's training examples: d.train's, in its order, each side drawn anew.
  std::shared_ptr<const Dataset> operator()(int64_t epoch) const;

 private:
  std::shared_ptr<const Dataset> best_;  // d.train: its text and best segmentations
  std::shared_ptr<const SentencePiece> src_spm_, tgt_spm_;
  Vocab src_vocab_, tgt_vocab_;
  double alpha_;
  int64_t longest_;  // longest side a drawn pair may have
  uint64_t seed_;
};

}  // namespace qkv::data
