// dyck, parity, majority: strings of symbols and their class, for an encoder-only classifier
// (data/classify_tasks.hpp has the definitions and the samplers).
//
// Each split is data.train_size / valid_size / test_size examples drawn from its own substream
// of data.seed; lengths (in symbols) are uniform in [data.min_len, data.max_len] (dyck: the even
// ones); dyck's depth bound is data.max_depth. Every source starts with <cls> (id 4), whatever
// model.pool reads, as BERT's inputs do: one framing for both read-outs, and a mean-pooled
// model averages over <cls> too. The target is the class id alone, in a vocabulary of class
// names (src_vocab.txt and tgt_vocab.txt of a run); the framing adds nothing to it (a class is
// one label, the model has no decoder side).
#include <algorithm>

#include "data/classify_tasks.hpp"
#include "data/task_loading.hpp"

namespace qkv::data {

namespace {

void check_keys(const DataConfig& c, ClassifyTask t) {
  QKV_DATA_KEY_CHECK(c.min_len >= 1, "min_len", "must be >= 1 (symbols), got ", c.min_len);
  QKV_DATA_KEY_CHECK(c.max_len >= c.min_len, "max_len", "must be >= data.min_len = ", c.min_len,
                     ", got ", c.max_len);
  if (t != ClassifyTask::dyck) return;
  QKV_DATA_KEY_CHECK(c.max_depth >= 1, "max_depth", "the depth bound must be >= 1, got ",
                     c.max_depth);
  const int64_t shortest = std::max<int64_t>(2, c.min_len + c.min_len % 2);  // even, >= 2
  QKV_DATA_KEY_CHECK(shortest <= c.max_len, "max_len",
                     "dyck strings have an even length >= 2 in [data.min_len, data.max_len]; [",
                     c.min_len, ", ", c.max_len, "] has none");
}

void load_classify(const DataConfig& c, ClassifyTask t, DataSplits& out) {
  check_keys(c, t);
  const ClassifyOptions o{
      .min_len = c.min_len, .max_len = c.max_len, .max_depth = c.max_depth, .cls = true};
  seeded_splits(
      c, [&](int64_t n, uint64_t seed) { return make_classify_task(t, o, n, seed); }, out);
  out.src_vocab = classify_vocab(t);
  out.tgt_vocab = class_names(t);
  // tgt_in is the placeholder (B, 1) of zeros the classifier does not read; tgt_out the class
  out.framing = Framing{.bos = 0, .eos = -1};
}

}  // namespace

void load_task_dyck(const DataConfig& c, DataSplits& out) {
  load_classify(c, ClassifyTask::dyck, out);
}
void load_task_parity(const DataConfig& c, DataSplits& out) {
  load_classify(c, ClassifyTask::parity, out);
}
void load_task_majority(const DataConfig& c, DataSplits& out) {
  load_classify(c, ClassifyTask::majority, out);
}

}  // namespace qkv::data
