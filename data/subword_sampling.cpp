#include "data/subword_sampling.hpp"

#include <algorithm>
#include <string_view>

#include "data/sentencepiece.hpp"
#include "data/tasks.hpp"

namespace qkv::data {

namespace {

// The longest side of the examples' segmentations.
int64_t longest_side(const Dataset& ds) {
  size_t n = 0;
  for (const Example& e : ds.examples) n = std::max({n, e.src.size(), e.tgt.size()});
  return static_cast<int64_t>(n);
}

}  // namespace

SubwordSampler::SubwordSampler(const DataSplits& d, double alpha, uint64_t seed)
    : best_(std::make_shared<const Dataset>(d.train)),
      src_spm_(d.src_spm),
      tgt_spm_(d.tgt_spm),
      src_vocab_(d.src_vocab),
      tgt_vocab_(d.tgt_vocab),
      alpha_(alpha),
      longest_(longest_side(d.train)),
      seed_(seed) {
  QKV_CHECK(src_spm_ && tgt_spm_, "SubwordSampler", "data.spm_alpha needs SentencePiece models");
  QKV_CHECK(best_->text.size() == best_->examples.size(), "SubwordSampler", "'", best_->name,
            "' has no text to segment");
  QKV_CHECK(alpha > 0 && alpha <= 1, "SubwordSampler", "alpha must be in (0, 1], got ", alpha);
}

std::shared_ptr<const Dataset> SubwordSampler::operator()(int64_t epoch) const {
  std::vector<std::string_view> src, tgt;
  src.reserve(best_->text.size());
  tgt.reserve(best_->text.size());
  for (const TextPair& p : best_->text) src.push_back(p.src), tgt.push_back(p.tgt);
  // Two streams an epoch, one per side, from the run's seed.
  const uint64_t epoch_seed = substream_seed(seed_, static_cast<uint64_t>(epoch));
  const auto src_pieces = src_spm_->sample(src, alpha_, substream_seed(epoch_seed, 0));
  const auto tgt_pieces = tgt_spm_->sample(tgt, alpha_, substream_seed(epoch_seed, 1));

  auto out = std::make_shared<Dataset>();
  out->name = best_->name;
  out->text = best_->text;
  out->examples.reserve(best_->examples.size());
  for (size_t i = 0; i < best_->examples.size(); ++i) {
    Example e{src_vocab_.encode(src_pieces[i]), tgt_vocab_.encode(tgt_pieces[i])};
    const bool fits = static_cast<int64_t>(e.src.size()) <= longest_ &&
                      static_cast<int64_t>(e.tgt.size()) <= longest_;
    out->examples.push_back(fits ? std::move(e) : best_->examples[i]);
  }
  return out;
}

}  // namespace qkv::data
