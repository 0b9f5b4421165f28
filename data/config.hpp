// DataConfig: the [data] options the training app reads from TOML, with their defaults, and
// load_data, which turns them into train / valid / test datasets with their vocabularies.
// docs/data.md lists the keys.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/batch.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/sentencepiece.hpp"
#include "data/task_kind.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

struct DataConfig {
  TaskKind task = TaskKind::copy;  // data/task_kind.hpp
  uint64_t seed = 0;               // generation and splitting; the loader has its own seed

  // synthetic tasks (copy / reverse / sort)
  int64_t vocab_size = 10;  // symbols "1".."V"
  int64_t min_len = 1;
  int64_t max_len = 10;
  int64_t max_depth = 4;  // dyck: the depth bound D of a balanced string (data/classify_tasks.hpp)

  // split sizes; for tsv, train_size = 0 takes every line not in valid or test; for parallel,
  // each caps its split at its first N pairs (0 = the whole file)
  int64_t train_size = 10000;
  int64_t valid_size = 500;
  int64_t test_size = 500;

  // text tasks (dates / tsv)
  std::string path;  // tsv: the corpus file; lm: the text (plain or gzip); parallel: the folder of
                     // SPLIT.LANG[.gz] files
  // parallel: line-aligned files PATH/SPLIT.LANG or PATH/SPLIT.LANG.gz, one pair per split
  std::string src_lang;
  std::string tgt_lang;
  std::string train_split = "train";
  std::string valid_split = "valid";
  std::string test_split = "test";
  bool lowercase = false;
  bool skip_malformed = false;
  TokenizerKind tokenizer = TokenizerKind::chars;  // char | word | sentencepiece
  // sentencepiece: trained on the training split at the start of a run (one model for both
  // sides when shared_vocab, else one per side)
  int64_t spm_vocab_size = 8000;
  SpmType spm_type = SpmType::unigram;  // unigram | bpe
  // > 0: subword regularization (data/subword_sampling.hpp): each epoch draws every training
  // pair's segmentation afresh; unigram: the sampling's smoothing, bpe: the merge dropout.
  double spm_alpha = 0.0;
  int64_t min_freq = 1;   // vocabulary: keep tokens seen this often in train
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

  // Not a config key: the folder of a run's SentencePiece models. load_data loads them from
  // there when present, else trains them (train.cpp then saves them there).
  std::string spm_dir;
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
  // sentencepiece: the models (one shared object when shared_vocab)
  std::shared_ptr<const SentencePiece> src_spm, tgt_spm;
};

// The SentencePiece model files of a run: spm.model (shared) or spm.src.model and
// spm.tgt.model, as (file name, bytes); empty for other tokenizers.
std::vector<std::pair<std::string, std::string>> sentencepiece_files(const DataSplits& d);

// Source text -> model input ids, tokenized as the data was (no lowercasing: the caller's).
Ids encode_source_text(const DataSplits& d, std::string_view text);
// Model output ids -> target text: detokenized, stops at <eos>, drops <pad> and <bos>.
std::string decode_target(const DataSplits& d, const Ids& ids);

// parallel: another split of the corpus folder (e.g. "test_2017_flickr"), read, lowercased
// and encoded as the run's splits were, with d's vocabularies. Never filtered by length.
Dataset load_parallel_split(const DataConfig& c, const DataSplits& d, const std::string& split);

// Builds the splits of c.task. Vocabularies (and SentencePiece models) of text tasks are built
// from the train split only, so valid / test tokens unseen in training become <unk>. For
// parallel, max_seq_len drops training pairs only: valid and test are always whole.
DataSplits load_data(const DataConfig& c);

// The loader options of c (batching and prefetch).
LoaderOptions loader_options(const DataConfig& c);

}  // namespace qkv::data
