// copy, reverse, sort: random symbol sequences and their targets (data/tasks.hpp).
#include "data/task_loading.hpp"
#include "data/tasks.hpp"

namespace qkv::data {

namespace {

void load_symbols(const DataConfig& c, SymbolTask kind, DataSplits& out) {
  const TaskOptions o{c.vocab_size, c.min_len, c.max_len};
  out.train = make_task(kind, o, c.train_size, substream_seed(c.seed, 0));
  out.valid = make_task(kind, o, c.valid_size, substream_seed(c.seed, 1));
  out.test = make_task(kind, o, c.test_size, substream_seed(c.seed, 2));
  name_splits(out, std::string(name_of(c.task)));
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
