// annotated_copy: The Annotated Transformer's copy task (data/tasks.hpp).
#include "data/task_loading.hpp"

namespace qkv::data {

void load_task_annotated_copy(const DataConfig& c, DataSplits& out) {
  seeded_splits(c, make_annotated_copy, out);
  out.src_vocab = out.tgt_vocab = annotated_copy_vocab();
  out.framing = annotated_copy_framing();
}

}  // namespace qkv::data
