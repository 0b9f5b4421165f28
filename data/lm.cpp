#include "data/lm.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "data/text_file.hpp"
#include "data/utf8.hpp"

namespace qkv::data {

namespace {

std::string utf8_of(char32_t c) {
  std::string s;
  append_utf8(s, c);
  return s;
}

// How a character is shown in messages: printable as itself, else as U+XXXX.
std::string shown(char32_t c) {
  if (c >= 0x20 && c != 0x7f) {  // built with += : gcc 12 warns falsely about "'" + std::string
    std::string s(1, '\'');
    s += utf8_of(c);
    s += '\'';
    return s;
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  return buf;
}

}  // namespace

LmCorpus load_lm_corpus(const std::string& path, const std::string& tokenizer) {
  QKV_CHECK(tokenizer == "char", "data.tokenizer",
            "task lm supports tokenizer = \"char\" only so far (SentencePiece language models are"
            " not implemented yet), got \"",
            tokenizer, "\"");
  const std::string text = read_text_file(path);
  size_t bad = 0;
  QKV_CHECK(valid_utf8(text, &bad), "data.path", path, ": invalid UTF-8 at byte ", bad);
  const std::vector<char32_t> chars = decode_utf8(text);
  QKV_CHECK(chars.size() >= 20, "data.path", path, " holds ", chars.size(),
            " characters; a language model needs a text to learn from");
  // nanoGPT: chars = sorted(set(text)) over the whole file, ids in that order.
  const std::set<char32_t> distinct(chars.begin(), chars.end());
  std::vector<std::string> tokens;
  std::map<char32_t, int64_t> id;
  for (char32_t c : distinct) {
    id[c] = static_cast<int64_t>(tokens.size());
    tokens.push_back(utf8_of(c));
  }
  LmCorpus out;
  out.vocab = Vocab(tokens);
  Ids all(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) all[i] = id.at(chars[i]);
  const size_t n_train = static_cast<size_t>(0.9 * static_cast<double>(all.size()));  // nanoGPT's
  out.train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_train));
  out.valid.assign(all.begin() + static_cast<std::ptrdiff_t>(n_train), all.end());
  return out;
}

Ids encode_chars(const std::string& text, const Vocab& vocab, const char* op) {
  size_t bad = 0;
  QKV_CHECK(valid_utf8(text, &bad), op, "invalid UTF-8 at byte ", bad);
  Ids ids;
  std::vector<std::string> unknown;
  for (char32_t c : decode_utf8(text)) {
    const std::string s = utf8_of(c);
    if (vocab.contains(s)) {
      ids.push_back(vocab.id(s));
    } else if (std::find(unknown.begin(), unknown.end(), shown(c)) == unknown.end()) {
      unknown.push_back(shown(c));
    }
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
    throw Error(cat(op, ": ", unknown.size() == 1 ? "character " : "characters ", list,
                    unknown.size() == 1 ? " is" : " are", " not in the model's vocabulary of ",
                    vocab.size(), " characters"));
  }
  return ids;
}

std::vector<int64_t> lm_offsets(int64_t n, int64_t block, int64_t batch, Generator& g) {
  QKV_CHECK(block >= 1 && n > block, "lm_offsets", "a stream of ", n,
            " tokens has no window of block_size ", block, " + 1");
  std::vector<int64_t> out(static_cast<size_t>(batch));
  for (auto& o : out) o = g.next_int(n - block);  // torch.randint(len(data) - block_size)
  return out;
}

Batch lm_batch(const Ids& tokens, const std::vector<int64_t>& offsets, int64_t block) {
  const int64_t b = static_cast<int64_t>(offsets.size());
  Batch out;
  out.tgt_in = empty({b, block}, DType::i64);
  out.tgt_out = empty({b, block}, DType::i64);
  int64_t* x = out.tgt_in.data<int64_t>();
  int64_t* y = out.tgt_out.data<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t o = offsets[static_cast<size_t>(r)];
    QKV_CHECK(o >= 0 && o + block < static_cast<int64_t>(tokens.size()), "lm_batch", "offset ", o,
              " + block_size ", block, " is past the stream's ", tokens.size(), " tokens");
    std::copy_n(tokens.begin() + o, block, x + r * block);
    std::copy_n(tokens.begin() + o + 1, block, y + r * block);
  }
  out.indices = offsets;
  out.tgt_tokens = b * block;
  out.global_size = b;
  out.global_tgt_tokens = out.tgt_tokens;
  return out;
}

LmLoader::LmLoader(std::shared_ptr<const Ids> tokens, int64_t block, int64_t batch, uint64_t seed,
                   int64_t rank, int64_t count)
    : tokens_(std::move(tokens)),
      block_(block),
      batch_(batch),
      rank_(rank),
      count_(count),
      gen_(seed) {
  QKV_CHECK(tokens_ && static_cast<int64_t>(tokens_->size()) > block_, "LmLoader",
            "the training stream (", tokens_ ? tokens_->size() : 0,
            " tokens) is shorter than data.block_size + 1 = ", block_ + 1);
  QKV_CHECK(batch_ >= 1 && count_ >= 1 && rank_ >= 0 && rank_ < count_, "LmLoader", "batch ",
            batch_, ", shard ", rank_, " of ", count_);
  state_.rng_seed = seed;
}

Batch LmLoader::next() {
  const std::vector<int64_t> global =
      lm_offsets(static_cast<int64_t>(tokens_->size()), block_, batch_, gen_);
  Batch b;
  const std::vector<int64_t> mine = count_ == 1 ? global : shard_indices(global, rank_, count_);
  if (!mine.empty()) b = lm_batch(*tokens_, mine, block_);
  b.global_size = batch_;
  b.global_tgt_tokens = batch_ * block_;
  ++state_.index;
  state_.rng_position = gen_.position();
  return b;
}

void LmLoader::restore(const LoaderState& s) {
  QKV_CHECK(s.index >= 0, "LmLoader::restore", "negative index ", s.index);
  gen_.set_state(s.rng_seed, s.rng_position);
  state_ = s;
}

}  // namespace qkv::data
