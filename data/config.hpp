// DataConfig: the [data] options the training app reads from TOML, with their defaults, and
// load_data, which turns them into train / valid / test datasets with their vocabularies.
// docs/data.md lists the keys.
#pragma once
#include <cstdint>
#include <string>

#include "data/batch.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

struct DataConfig {
  // copy | reverse | sort | annotated_copy | dates | tsv | lm (language modelling, data/lm.hpp)
  std::string task = "copy";
  uint64_t seed = 0;  // generation and splitting; the loader has its own seed

  // synthetic tasks (copy / reverse / sort)
  int64_t vocab_size = 10;  // symbols "1".."V"
  int64_t min_len = 1;
  int64_t max_len = 10;

  // split sizes; for tsv, train_size = 0 takes every line not in valid or test
  int64_t train_size = 10000;
  int64_t valid_size = 500;
  int64_t test_size = 500;

  // text tasks (dates / tsv)
  std::string path;  // tsv: the corpus file; lm: the text (plain or gzip)
  bool lowercase = false;
  bool skip_malformed = false;
  std::string tokenizer = "char";  // char | word
  int64_t min_freq = 1;            // vocabulary: keep tokens seen this often in train
  int64_t max_vocab = 0;  // vocabulary: at most this many entries, specials included (0 = no cap)
  bool shared_vocab = true;  // one vocabulary for both sides
  int64_t max_seq_len =
      0;                // tsv: drop pairs with a side longer than this many tokens (0 = keep all)
  int year_min = 1950;  // dates: the 100-year window
  int year_max = 2049;

  // batching
  int64_t batch_size = 64;
  int64_t max_tokens = 0;  // 0 = no cap
  bool bucket = true;
  int64_t bucket_pool = 50;
  bool shuffle = true;
  int64_t prefetch = 2;

  int64_t block_size = 64;  // lm: tokens per training window (the context length)
};

// Errors name the key: "data.batch_size: must be >= 1, got 0".
void validate(const DataConfig& c);

struct DataSplits {
  Dataset train, valid, test;
  Vocab src_vocab, tgt_vocab;  // equal when shared (and for synthetic tasks)
  Framing framing;
  TokenizerKind tokenizer = TokenizerKind::chars;  // text tasks: how to encode new input
  int64_t skipped = 0;                             // tsv: malformed lines skipped
  int64_t dropped = 0;                             // tsv: pairs dropped by max_seq_len
  // lm: the token streams (first 90% / last 10% of the text); the Datasets stay empty and
  // src_vocab == tgt_vocab is the character vocabulary.
  Ids lm_train, lm_valid;
};

// Builds the splits of c.task. Vocabularies of text tasks are built from the train split
// only, so valid / test tokens unseen in training become <unk>.
DataSplits load_data(const DataConfig& c);

// The loader options of c (batching and prefetch).
LoaderOptions loader_options(const DataConfig& c);

}  // namespace qkv::data
