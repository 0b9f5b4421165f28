// annotated_copy: The Annotated Transformer's copy task (data/tasks.hpp).
#include "data/task_loading.hpp"
#include "data/tasks.hpp"

namespace qkv::data {

void load_task_annotated_copy(const DataConfig& c, DataSplits& out) {
  out.train = make_annotated_copy(c.train_size, substream_seed(c.seed, 0));
  out.valid = make_annotated_copy(c.valid_size, substream_seed(c.seed, 1));
  out.test = make_annotated_copy(c.test_size, substream_seed(c.seed, 2));
  name_splits(out, std::string(name_of(c.task)));
  out.src_vocab = out.tgt_vocab = annotated_copy_vocab();
  out.framing = annotated_copy_framing();
}

}  // namespace qkv::data
