// Decoding and evaluation of an encoder-decoder (nn::EncoderDecoder: any model.decoder): greedy
// decoding with the key/value cache, beam search (beam_search.cpp) and the teacher-forced metrics
// with greedy exact match that validation and `qkv eval` report. Consumers reach them through the
// run's inference (run/inference.hpp); training's validation calls evaluate directly.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "data/config.hpp"
#include "data/dataset.hpp"
#include "nn/encoder_decoder.hpp"

namespace qkv::run {

struct Metrics {
  double loss = 0;            // teacher-forced cross-entropy per target token (no smoothing)
  double token_accuracy = 0;  // teacher-forced argmax == label, over real target tokens
  double exact_match = 0;     // greedy decodes equal to the target, over examples
  int64_t examples = 0;
  int64_t tokens = 0;
  // Text tasks (evaluate with a DataSplits): corpus BLEU and chrF of the greedy decodes,
  // detokenized, against the split's target text (data/metrics.hpp); -1 when not computed.
  double bleu = -1, chrf = -1;
  std::vector<std::string> hypotheses;  // the detokenized greedy decodes, in split order
  double decode_seconds = 0;            // the time spent decoding them
};

// The most tokens the greedy decode of a source of n tokens may have, when its target has
// `target`: the family's rule (Family::scored_output_tokens).
using ScoredLength = std::function<int64_t(int64_t n, int64_t target)>;

// Teacher-forced loss and accuracy plus greedy exact match over (at most limit, 0 = all)
// examples of ds, in order, in eval mode and without recording; each decode is at most
// length(source, target) tokens. With text (a text task's DataSplits, whose vocabularies and
// tokenizer ds was encoded with) it also keeps the detokenized decodes and scores BLEU and chrF.
Metrics evaluate(const nn::EncoderDecoder& model, const data::Dataset& ds, const data::Framing& f,
                 int64_t batch_size, const ScoredLength& length, int64_t limit = 0,
                 const data::DataSplits* text = nullptr);

// Sources padded into (B, S) int64 ids (S the longest, at least 1) and their (B, S) bool
// validity mask, true on real tokens: the encoder's input for greedy and beam decoding.
std::pair<Tensor, Tensor> pad_sources(const std::vector<data::Ids>& srcs);

// Greedy decoding of a batch of sources; returns each output's ids up to (not including) the
// first <eos> (or exactly max_len ids when the framing has no <eos>).
std::vector<data::Ids> greedy_decode(const nn::EncoderDecoder& model,
                                     const std::vector<data::Ids>& srcs, const data::Framing& f,
                                     const std::vector<int64_t>& max_lens);
// Beam search with length normalisation (beam_search.cpp): hypotheses are ranked by
// log P / length^alpha, the length counting one more for the <eos> where the framing has one;
// each source's output stops at <eos> or max_lens[i] ids. A hypothesis ends where its <eos>
// ranks among the step's best `beam` candidates (fairseq's rule). A source's search stops once
// `beam` hypotheses have ended (the best of them is its output) or at its length limit (then
// the unfinished ones compete too). B sources x `beam` hypotheses are one batch of B * beam
// decoder rows, so each step is one decoder call; one source is a batch of one.
std::vector<data::Ids> beam_decode(const nn::EncoderDecoder& model,
                                   const std::vector<data::Ids>& srcs, const data::Framing& f,
                                   int64_t beam, const std::vector<int64_t>& max_lens,
                                   double alpha = 1.0);

// The search of beam_decode over any next-token model, for B sources: `step(last)` takes the
// last token of each of the B * beam rows (row i * beam + k: source i's k-th hypothesis; <bos>
// at the start and once a source is done; a source with fewer than `beam` live hypotheses
// repeats its last one on the spare rows) and returns their (B * beam, V) float
// log-probabilities; `reorder(order)` then makes each row r continue row order[r]'s state.
using BeamStep = std::function<Tensor(const std::vector<int64_t>& last)>;
using BeamReorder = std::function<void(const std::vector<int64_t>& order)>;
std::vector<data::Ids> beam_search(int64_t b, int64_t beam, const std::vector<int64_t>& max_lens,
                                   double alpha, const data::Framing& f, const BeamStep& step,
                                   const BeamReorder& reorder);

}  // namespace qkv::run
