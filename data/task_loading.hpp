// What a task's loader (data/tasks/*.cpp, declared by QKV_TASKS in data/task_kind.hpp) builds
// from: the [data] key check, text pairs turned into encoded splits, a parallel corpus split
// read from its two files, split names.
#pragma once
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/config.hpp"
#include "data/corpus.hpp"
#include "data/sentencepiece.hpp"
#include "data/tasks.hpp"

// A [data] key's check: throws "data.KEY: MESSAGE..." unless cond holds.
#define QKV_DATA_KEY_CHECK(cond, key, ...)                                      \
  do {                                                                          \
    if (!(cond)) throw ::qkv::Error(::qkv::cat("data." key ": ", __VA_ARGS__)); \
  } while (0)

namespace qkv::data {

// The SentencePiece training options of the [data] keys (parallel corpora and language models).
SentencePieceOptions sentencepiece_options(const DataConfig& c);

// Tokenises, builds the vocabularies from train (or loads the run's SentencePiece models from
// c.spm_dir), encodes all three splits into out, named NAME/train, NAME/valid, NAME/test.
// data.max_seq_len filters train, and valid and test too unless the task is parallel.
void text_splits(const DataConfig& c, const std::string& name, std::vector<TextPair> train,
                 std::vector<TextPair> valid, std::vector<TextPair> test, DataSplits& out);

// The pairs of split SPLIT of a parallel corpus (SPLIT.src_lang / SPLIT.tgt_lang under
// data.path), at most limit of them (0: all); malformed pairs skipped are added to *skipped.
std::vector<TextPair> read_split(const DataConfig& c, const std::string& split, int64_t limit,
                                 int64_t* skipped);

// Names the three splits BASE/train, BASE/valid, BASE/test.
void name_splits(DataSplits& out, const std::string& base);

// The three splits of a generated task, make(n, seed) -> Dataset each: data.train_size,
// valid_size and test_size examples from substreams 0, 1 and 2 of data.seed (so no split
// shares a stream with another), named after the task.
template <class Make>
void seeded_splits(const DataConfig& c, Make&& make, DataSplits& out) {
  out.train = make(c.train_size, substream_seed(c.seed, 0));
  out.valid = make(c.valid_size, substream_seed(c.seed, 1));
  out.test = make(c.test_size, substream_seed(c.seed, 2));
  name_splits(out, std::string(name_of(c.task)));
}

}  // namespace qkv::data
