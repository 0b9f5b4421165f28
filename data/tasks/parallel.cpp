// parallel: line-aligned corpus files per split, SPLIT.LANG[.gz] (data/parallel.hpp).
#include <filesystem>

#include "data/parallel.hpp"
#include "data/task_loading.hpp"

namespace qkv::data {

// Each split from its own pair of files.
void load_task_parallel(const DataConfig& c, DataSplits& out) {
  std::vector<TextPair> train = read_split(c, c.train_split, c.train_size, &out.skipped);
  std::vector<TextPair> valid = read_split(c, c.valid_split, c.valid_size, &out.skipped);
  std::vector<TextPair> test = read_split(c, c.test_split, c.test_size, &out.skipped);
  QKV_DATA_KEY_CHECK(!train.empty(), "train_split", "no sentence pairs in ",
                     split_file(c.path, c.train_split, c.src_lang));
  const std::string base = std::filesystem::path(c.path).filename().string();
  text_splits(c, base, std::move(train), std::move(valid), std::move(test), out);
  out.train.name = base + "/" + c.train_split;
  out.valid.name = base + "/" + c.valid_split;
  out.test.name = base + "/" + c.test_split;
}

}  // namespace qkv::data
