#include "data/config.hpp"

#include <filesystem>

#include "data/corpus.hpp"
#include "data/parallel.hpp"
#include "data/task_loading.hpp"

namespace qkv::data {

void validate(const DataConfig& c) {
  const bool parallel = c.task == TaskKind::parallel, tsv = c.task == TaskKind::tsv;
  const bool lm = c.task == TaskKind::lm;  // running text (repeat, the other LM task, is generated)
  QKV_DATA_KEY_CHECK(c.vocab_size >= 1, "vocab_size", "must be >= 1, got ", c.vocab_size);
  QKV_DATA_KEY_CHECK(c.min_len >= 1, "min_len", "must be >= 1, got ", c.min_len);
  QKV_DATA_KEY_CHECK(c.max_len >= c.min_len, "max_len", "must be >= min_len = ", c.min_len,
                     ", got ", c.max_len);
  QKV_DATA_KEY_CHECK(c.train_size >= 0, "train_size", "must be >= 0, got ", c.train_size);
  QKV_DATA_KEY_CHECK(c.train_size > 0 || tsv || parallel, "train_size", "must be >= 1 for ",
                     name_of(c.task));
  QKV_DATA_KEY_CHECK(c.valid_size >= 0, "valid_size", "must be >= 0, got ", c.valid_size);
  QKV_DATA_KEY_CHECK(c.test_size >= 0, "test_size", "must be >= 0, got ", c.test_size);
  QKV_DATA_KEY_CHECK(!tsv || !c.path.empty(), "path", "is required for task tsv");
  QKV_DATA_KEY_CHECK(!lm || !c.path.empty(), "path", "is required for task lm");
  QKV_DATA_KEY_CHECK(c.block_size >= 1, "block_size", "must be >= 1, got ", c.block_size);
  QKV_DATA_KEY_CHECK(!lm || c.tokenizer != TokenizerKind::words, "tokenizer",
                     "task lm takes \"char\" or \"sentencepiece\", got \"word\"");
  QKV_DATA_KEY_CHECK(!parallel || !c.path.empty(), "path",
                     "is required for task parallel (the folder of SPLIT.LANG[.gz] files)");
  QKV_DATA_KEY_CHECK(!parallel || !c.src_lang.empty(), "src_lang",
                     "is required for task parallel (e.g. \"de\" for train.de.gz)");
  QKV_DATA_KEY_CHECK(!parallel || !c.tgt_lang.empty(), "tgt_lang",
                     "is required for task parallel (e.g. \"en\" for train.en.gz)");
  QKV_DATA_KEY_CHECK(!parallel || c.src_lang != c.tgt_lang, "tgt_lang",
                     "must differ from src_lang");
  for (const std::string* sp : {&c.train_split, &c.valid_split, &c.test_split})
    QKV_DATA_KEY_CHECK(!parallel || (!sp->empty() && sp->find('/') == std::string::npos),
                       "train_split", "split names must be non-empty file-name stems, got '", *sp,
                       "'");
  QKV_DATA_KEY_CHECK(c.tokenizer != TokenizerKind::sentencepiece || c.spm_vocab_size > 4,
                     "spm_vocab_size", "must be more than the 4 specials, got ", c.spm_vocab_size);
  QKV_DATA_KEY_CHECK(c.spm_alpha >= 0 && c.spm_alpha <= 1, "spm_alpha", "must be in [0, 1], got ",
                     c.spm_alpha);
  QKV_DATA_KEY_CHECK(c.spm_alpha == 0 || (parallel && c.tokenizer == TokenizerKind::sentencepiece),
                     "spm_alpha",
                     "samples segmentations of task parallel with tokenizer "
                     "\"sentencepiece\" only (task ",
                     name_of(c.task), ", tokenizer ", name_of(c.tokenizer), ")");
  QKV_DATA_KEY_CHECK(c.min_freq >= 1, "min_freq", "must be >= 1, got ", c.min_freq);
  QKV_DATA_KEY_CHECK(c.max_vocab == 0 || c.max_vocab > 4, "max_vocab",
                     "must be 0 (no cap) or more than the 4 specials, got ", c.max_vocab);
  QKV_DATA_KEY_CHECK(c.max_seq_len >= 0, "max_seq_len", "must be >= 0, got ", c.max_seq_len);
  QKV_DATA_KEY_CHECK(c.batch_size >= 1, "batch_size", "must be >= 1, got ", c.batch_size);
  QKV_DATA_KEY_CHECK(c.max_tokens >= 0, "max_tokens", "must be >= 0, got ", c.max_tokens);
  QKV_DATA_KEY_CHECK(c.bucket_pool >= 1, "bucket_pool", "must be >= 1, got ", c.bucket_pool);
  QKV_DATA_KEY_CHECK(c.prefetch >= 0, "prefetch", "must be >= 0, got ", c.prefetch);
}

LoaderOptions loader_options(const DataConfig& c) {
  LoaderOptions o;
  o.batch.batch_size = c.batch_size;
  o.batch.max_tokens = c.max_tokens;
  o.batch.bucket = c.bucket;
  o.batch.bucket_pool = c.bucket_pool;
  o.batch.shuffle = c.shuffle;
  o.prefetch = c.prefetch;
  return o;
}

// The SentencePiece training options of the [data] keys (parallel corpora and language models).
SentencePieceOptions sentencepiece_options(const DataConfig& c) {
  SentencePieceOptions o;
  o.vocab_size = c.spm_vocab_size;
  o.type = c.spm_type;
  o.seed = c.seed;
  return o;
}

namespace {
using Tokenized = std::vector<std::vector<std::string>>;

// The vocabularies of the training pairs: SentencePiece models (loaded from c.spm_dir when
// it holds them, else trained), or a vocabulary of char / word tokens.
void build_vocabularies(const DataConfig& c, const std::vector<TextPair>& train, DataSplits& out) {
  const TokenizerKind kind = c.tokenizer;
  out.tokenizer = kind;
  if (kind == TokenizerKind::sentencepiece) {
    namespace fs = std::filesystem;
    const SentencePieceOptions o = sentencepiece_options(c);
    auto get = [&](const char* file, std::vector<std::string> sentences) {
      const fs::path saved = fs::path(c.spm_dir) / file;
      if (!c.spm_dir.empty() && fs::exists(saved))
        return std::make_shared<const SentencePiece>(SentencePiece::load(saved.string()));
      return std::make_shared<const SentencePiece>(SentencePiece::train(sentences, o));
    };
    std::vector<std::string> src, tgt;
    for (const auto& p : train) src.push_back(p.src), tgt.push_back(p.tgt);
    if (c.shared_vocab) {
      src.insert(src.end(), tgt.begin(), tgt.end());
      out.src_spm = out.tgt_spm = get("spm.model", std::move(src));
    } else {
      out.src_spm = get("spm.src.model", std::move(src));
      out.tgt_spm = get("spm.tgt.model", std::move(tgt));
    }
    out.src_vocab = out.src_spm->vocab();
    out.tgt_vocab = out.tgt_spm->vocab();
  } else {
    Tokenized src_train, tgt_train;
    for (const auto& p : train) {
      src_train.push_back(tokenize(p.src, kind));
      tgt_train.push_back(tokenize(p.tgt, kind));
    }
    if (c.shared_vocab) {
      Tokenized both = src_train;
      both.insert(both.end(), tgt_train.begin(), tgt_train.end());
      out.src_vocab = out.tgt_vocab = Vocab::build(both, c.min_freq, c.max_vocab);
    } else {
      out.src_vocab = Vocab::build(src_train, c.min_freq, c.max_vocab);
      out.tgt_vocab = Vocab::build(tgt_train, c.min_freq, c.max_vocab);
    }
  }
  out.framing = framing_for(out.tgt_vocab);
}

Ids encode_target_text(const DataSplits& d, std::string_view text) {
  if (d.tokenizer == TokenizerKind::sentencepiece)
    return d.tgt_vocab.encode(d.tgt_spm->encode(text));
  return d.tgt_vocab.encode(tokenize(text, d.tokenizer));
}

// Encodes pairs with d's vocabularies; max_seq_len > 0 drops (and counts) longer pairs.
Dataset encode_pairs(const DataSplits& d, std::vector<TextPair>& pairs, const std::string& name,
                     int64_t max_seq_len, int64_t& dropped) {
  Dataset ds;
  ds.name = name;
  for (auto& p : pairs) {
    Example e{encode_source_text(d, p.src), encode_target_text(d, p.tgt)};
    if (max_seq_len > 0 && (static_cast<int64_t>(e.src.size()) > max_seq_len ||
                            static_cast<int64_t>(e.tgt.size()) > max_seq_len)) {
      ++dropped;
      continue;
    }
    ds.examples.push_back(std::move(e));
    ds.text.push_back(std::move(p));
  }
  return ds;
}

}  // namespace

// Tokenises, builds the vocabularies from train, encodes all three splits (parallel corpora:
// max_seq_len filters train alone, so valid and test stay whole).
void text_splits(const DataConfig& c, const std::string& name, std::vector<TextPair> train,
                 std::vector<TextPair> valid, std::vector<TextPair> test, DataSplits& out) {
  build_vocabularies(c, train, out);
  const int64_t eval_cap = c.task == TaskKind::parallel ? 0 : c.max_seq_len;
  out.train = encode_pairs(out, train, name + "/train", c.max_seq_len, out.dropped);
  out.valid = encode_pairs(out, valid, name + "/valid", eval_cap, out.dropped);
  out.test = encode_pairs(out, test, name + "/test", eval_cap, out.dropped);
}

std::vector<TextPair> read_split(const DataConfig& c, const std::string& split, int64_t limit,
                                 int64_t* skipped) {
  ParallelOptions o;
  o.lowercase = c.lowercase;
  o.skip_empty = c.skip_malformed;
  o.limit = limit;
  ParallelCorpus pc = read_parallel(split_file(c.path, split, c.src_lang),
                                    split_file(c.path, split, c.tgt_lang), o);
  if (skipped) *skipped += pc.skipped;
  return std::move(pc.pairs);
}

void name_splits(DataSplits& out, const std::string& base) {
  out.train.name = base + "/train";
  out.valid.name = base + "/valid";
  out.test.name = base + "/test";
}

DataSplits load_data(const DataConfig& c) {
  validate(c);
  DataSplits out;
  switch (c.task) {
#define QKV_TASK_LOAD(name, family, source) \
  case TaskKind::name:                      \
    load_task_##name(c, out);               \
    break;
    QKV_TASKS(QKV_TASK_LOAD)
#undef QKV_TASK_LOAD
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> sentencepiece_files(const DataSplits& d) {
  if (!d.src_spm) return {};
  if (d.src_spm == d.tgt_spm) return {{"spm.model", d.src_spm->serialized()}};
  return {{"spm.src.model", d.src_spm->serialized()}, {"spm.tgt.model", d.tgt_spm->serialized()}};
}

Ids encode_source_text(const DataSplits& d, std::string_view text) {
  if (d.tokenizer == TokenizerKind::sentencepiece)
    return d.src_vocab.encode(d.src_spm->encode(text));
  return d.src_vocab.encode(tokenize(text, d.tokenizer));
}

std::string decode_target(const DataSplits& d, const Ids& ids) {
  const std::vector<std::string> pieces = d.tgt_vocab.decode(ids);
  if (d.tokenizer == TokenizerKind::sentencepiece) return d.tgt_spm->decode(pieces);
  return detokenize(pieces);
}

Dataset load_parallel_split(const DataConfig& c, const DataSplits& d, const std::string& split) {
  QKV_CHECK(c.task == TaskKind::parallel, "load_parallel_split", "data.task is '", name_of(c.task),
            "', not parallel: only parallel corpora have named splits");
  QKV_CHECK(!split.empty() && split.find('/') == std::string::npos, "load_parallel_split",
            "bad split name '", split, "'");
  std::vector<TextPair> pairs = read_split(c, split, 0, nullptr);
  int64_t dropped = 0;
  return encode_pairs(d, pairs, std::filesystem::path(c.path).filename().string() + "/" + split, 0,
                      dropped);
}

}  // namespace qkv::data
