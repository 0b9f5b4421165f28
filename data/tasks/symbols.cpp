// copy, reverse, sort: random symbol sequences and their targets (data/tasks.hpp).
#include "data/task_loading.hpp"

namespace qkv::data {

namespace {

void load_symbols(const DataConfig& c, SymbolTask kind, DataSplits& out) {
  const TaskOptions o{c.vocab_size, c.min_len, c.max_len};
  seeded_splits(
      c, [&](int64_t n, uint64_t seed) { return make_task(kind, o, n, seed); }, out);
  out.src_vocab = out.tgt_vocab = task_vocab(c.vocab_size);
  out.framing = framing_for(out.tgt_vocab);
}

}  // namespace

void load_task_copy(const DataConfig& c, DataSplits& out) {
  load_symbols(c, SymbolTask::copy, out);
}
void load_task_reverse(const DataConfig& c, DataSplits& out) {
  load_symbols(c, SymbolTask::reverse, out);
}
void load_task_sort(const DataConfig& c, DataSplits& out) {
  load_symbols(c, SymbolTask::sort, out);
}

}  // namespace qkv::data
