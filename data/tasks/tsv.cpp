// tsv: a tab-separated corpus of sentence pairs, split by the seed (data/corpus.hpp).
#include "data/task_loading.hpp"

namespace qkv::data {

namespace {

std::vector<TextPair> pick(const std::vector<TextPair>& all, const std::vector<int64_t>& idx) {
  std::vector<TextPair> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(all[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

void load_task_tsv(const DataConfig& c, DataSplits& out) {
  TsvOptions o;
  o.lowercase = c.lowercase;
  o.skip_malformed = c.skip_malformed;
  const TsvCorpus corpus = read_tsv(c.path, o);
  out.skipped = corpus.skipped;
  QKV_DATA_KEY_CHECK(
      !corpus.pairs.empty(), "path", c.path, " holds no sentence pairs",
      corpus.skipped ? cat(" (", corpus.skipped, " malformed lines skipped)") : std::string());
  const SplitIndices s = split_indices(static_cast<int64_t>(corpus.pairs.size()), c.train_size,
                                       c.valid_size, c.test_size, c.seed);
  text_splits(c, c.path, pick(corpus.pairs, s.train), pick(corpus.pairs, s.valid),
              pick(corpus.pairs, s.test), out);
}

}  // namespace qkv::data
