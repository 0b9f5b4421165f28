#include "data/config.hpp"

#include "data/corpus.hpp"
#include "data/dates.hpp"
#include "data/lm.hpp"
#include "data/tasks.hpp"
#include "data/utf8.hpp"

namespace qkv::data {

#define QKV_KEY_CHECK(cond, key, ...)                                           \
  do {                                                                          \
    if (!(cond)) throw ::qkv::Error(::qkv::cat("data." key ": ", __VA_ARGS__)); \
  } while (0)

void validate(const DataConfig& c) {
  const bool synthetic = c.task == "copy" || c.task == "reverse" || c.task == "sort";
  QKV_KEY_CHECK(synthetic || c.task == "annotated_copy" || c.task == "dates" || c.task == "tsv" ||
                    c.task == "lm",
                "task", "unknown task '", c.task,
                "' (expected copy, reverse, sort, annotated_copy, dates, tsv or lm)");
  QKV_KEY_CHECK(c.vocab_size >= 1, "vocab_size", "must be >= 1, got ", c.vocab_size);
  QKV_KEY_CHECK(c.min_len >= 1, "min_len", "must be >= 1, got ", c.min_len);
  QKV_KEY_CHECK(c.max_len >= c.min_len, "max_len", "must be >= min_len = ", c.min_len, ", got ",
                c.max_len);
  QKV_KEY_CHECK(c.train_size >= 0, "train_size", "must be >= 0, got ", c.train_size);
  QKV_KEY_CHECK(c.train_size > 0 || c.task == "tsv", "train_size", "must be >= 1 for ", c.task);
  QKV_KEY_CHECK(c.valid_size >= 0, "valid_size", "must be >= 0, got ", c.valid_size);
  QKV_KEY_CHECK(c.test_size >= 0, "test_size", "must be >= 0, got ", c.test_size);
  QKV_KEY_CHECK(c.task != "tsv" || !c.path.empty(), "path", "is required for task tsv");
  QKV_KEY_CHECK(c.task != "lm" || !c.path.empty(), "path", "is required for task lm");
  QKV_KEY_CHECK(c.block_size >= 1, "block_size", "must be >= 1, got ", c.block_size);
  QKV_KEY_CHECK(c.task != "lm" || c.tokenizer == "char", "tokenizer",
                "task lm supports \"char\" only so far (SentencePiece language models are not"
                " implemented yet), got \"",
                c.tokenizer, "\"");
  if (c.task != "lm") (void)parse_tokenizer(c.tokenizer);
  QKV_KEY_CHECK(c.min_freq >= 1, "min_freq", "must be >= 1, got ", c.min_freq);
  QKV_KEY_CHECK(c.max_vocab == 0 || c.max_vocab > 4, "max_vocab",
                "must be 0 (no cap) or more than the 4 specials, got ", c.max_vocab);
  QKV_KEY_CHECK(c.max_seq_len >= 0, "max_seq_len", "must be >= 0, got ", c.max_seq_len);
  QKV_KEY_CHECK(c.batch_size >= 1, "batch_size", "must be >= 1, got ", c.batch_size);
  QKV_KEY_CHECK(c.max_tokens >= 0, "max_tokens", "must be >= 0, got ", c.max_tokens);
  QKV_KEY_CHECK(c.bucket_pool >= 1, "bucket_pool", "must be >= 1, got ", c.bucket_pool);
  QKV_KEY_CHECK(c.prefetch >= 0, "prefetch", "must be >= 0, got ", c.prefetch);
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

namespace {
using Tokenized = std::vector<std::vector<std::string>>;

// Tokenises, builds the vocabularies from train, encodes all three splits.
void text_splits(const DataConfig& c, const std::string& name, std::vector<TextPair> train,
                 std::vector<TextPair> valid, std::vector<TextPair> test, DataSplits& out) {
  const TokenizerKind kind = parse_tokenizer(c.tokenizer);
  out.tokenizer = kind;
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
  out.framing = framing_for(out.tgt_vocab);
  auto encode_split = [&](std::vector<TextPair>& pairs, const char* split) {
    Dataset ds;
    ds.name = name + "/" + split;
    for (auto& p : pairs) {
      Example e{out.src_vocab.encode(tokenize(p.src, kind)),
                out.tgt_vocab.encode(tokenize(p.tgt, kind))};
      if (c.max_seq_len > 0 && (static_cast<int64_t>(e.src.size()) > c.max_seq_len ||
                                static_cast<int64_t>(e.tgt.size()) > c.max_seq_len)) {
        ++out.dropped;
        continue;
      }
      ds.examples.push_back(std::move(e));
      ds.text.push_back(std::move(p));
    }
    return ds;
  };
  out.train = encode_split(train, "train");
  out.valid = encode_split(valid, "valid");
  out.test = encode_split(test, "test");
}

void name_splits(DataSplits& out, const std::string& base) {
  out.train.name = base + "/train";
  out.valid.name = base + "/valid";
  out.test.name = base + "/test";
}

std::vector<TextPair> pick(const std::vector<TextPair>& all, const std::vector<int64_t>& idx) {
  std::vector<TextPair> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(all[static_cast<size_t>(i)]);
  return out;
}

std::vector<TextPair> date_text(const std::vector<DatePair>& v, bool lowercase) {
  std::vector<TextPair> out;
  for (const auto& d : v) out.push_back({lowercase ? to_lower_utf8(d.human) : d.human, d.iso});
  return out;
}
}  // namespace

DataSplits load_data(const DataConfig& c) {
  validate(c);
  DataSplits out;
  if (c.task == "copy" || c.task == "reverse" || c.task == "sort") {
    const TaskKind kind = parse_task(c.task);
    const TaskOptions o{c.vocab_size, c.min_len, c.max_len};
    out.train = make_task(kind, o, c.train_size, substream_seed(c.seed, 0));
    out.valid = make_task(kind, o, c.valid_size, substream_seed(c.seed, 1));
    out.test = make_task(kind, o, c.test_size, substream_seed(c.seed, 2));
    name_splits(out, c.task);
    out.src_vocab = out.tgt_vocab = task_vocab(c.vocab_size);
    out.framing = framing_for(out.tgt_vocab);
  } else if (c.task == "annotated_copy") {
    out.train = make_annotated_copy(c.train_size, substream_seed(c.seed, 0));
    out.valid = make_annotated_copy(c.valid_size, substream_seed(c.seed, 1));
    out.test = make_annotated_copy(c.test_size, substream_seed(c.seed, 2));
    name_splits(out, c.task);
    out.src_vocab = out.tgt_vocab = annotated_copy_vocab();
    out.framing = annotated_copy_framing();
  } else if (c.task == "dates") {
    DateOptions o;
    o.year_min = c.year_min, o.year_max = c.year_max;
    o.train_size = c.train_size, o.valid_size = c.valid_size, o.test_size = c.test_size;
    o.seed = c.seed;
    const DateSplits d = generate_dates(o);
    text_splits(c, "dates", date_text(d.train, c.lowercase), date_text(d.valid, c.lowercase),
                date_text(d.test, c.lowercase), out);
  } else if (c.task == "lm") {
    LmCorpus corpus = load_lm_corpus(c.path, c.tokenizer);
    QKV_KEY_CHECK(static_cast<int64_t>(corpus.valid.size()) > c.block_size, "block_size",
                  c.block_size, " does not fit in the validation text (", corpus.valid.size(),
                  " tokens, the last 10% of ", c.path, ")");
    out.lm_train = std::move(corpus.train);
    out.lm_valid = std::move(corpus.valid);
    out.src_vocab = out.tgt_vocab = corpus.vocab;
    name_splits(out, c.path);
    out.framing = Framing{-1, -1};  // no <bos> / <eos>: windows of running text
  } else {
    TsvOptions o;
    o.lowercase = c.lowercase;
    o.skip_malformed = c.skip_malformed;
    const TsvCorpus corpus = read_tsv(c.path, o);
    out.skipped = corpus.skipped;
    QKV_KEY_CHECK(
        !corpus.pairs.empty(), "path", c.path, " holds no sentence pairs",
        corpus.skipped ? cat(" (", corpus.skipped, " malformed lines skipped)") : std::string());
    const SplitIndices s = split_indices(static_cast<int64_t>(corpus.pairs.size()), c.train_size,
                                         c.valid_size, c.test_size, c.seed);
    text_splits(c, c.path, pick(corpus.pairs, s.train), pick(corpus.pairs, s.valid),
                pick(corpus.pairs, s.test), out);
  }
  return out;
}

}  // namespace qkv::data
