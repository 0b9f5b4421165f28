#include "data/lm.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
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

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string_view::npos; at = nl + 1)
    lines.emplace_back(text.substr(at, nl - at));
  lines.emplace_back(text.substr(at));  // after the last break (empty when the text ends in one)
  return lines;
}

// Lines [first, last) as pieces, an <eos> after each line that had a line break after it in
// the text (every line but the text's last).
Ids encode_lines(const std::vector<std::string>& lines, size_t first, size_t last, const Vocab& v,
                 const SentencePiece& spm) {
  Ids out;
  for (size_t i = first; i < last; ++i) {
    for (const std::string& piece : spm.encode(lines[i])) out.push_back(v.id(piece));
    if (i + 1 < lines.size()) out.push_back(v.eos());  // the line break
  }
  return out;
}

// Pieces line by line, <eos> for every line break; the model trained on the lines before the
// line break at 90% of the text, unless o.spm_model holds one already.
LmCorpus load_sentencepiece_corpus(const std::string& path, const std::string& text,
                                   const LmOptions& o) {
  const std::vector<std::string> lines = split_lines(text);
  const size_t cut_at = static_cast<size_t>(0.9 * static_cast<double>(text.size()));
  size_t train_lines = 0;
  for (size_t bytes = 0; train_lines < lines.size() && bytes < cut_at; ++train_lines)
    bytes += lines[train_lines].size() + 1;
  QKV_CHECK(train_lines < lines.size(), "data.path", path,
            ": a SentencePiece language model needs line breaks (the split into 90% train and 10%"
            " validation is made at one)");
  LmCorpus out;
  if (!o.spm_model.empty() && std::filesystem::exists(o.spm_model)) {
    out.spm = std::make_shared<const SentencePiece>(SentencePiece::load(o.spm_model));
  } else {
    std::vector<std::string> sentences;
    for (size_t i = 0; i < train_lines; ++i)
      if (!lines[i].empty()) sentences.push_back(lines[i]);
    out.spm = std::make_shared<const SentencePiece>(SentencePiece::train(sentences, o.spm));
  }
  out.vocab = out.spm->vocab();
  out.train = encode_lines(lines, 0, train_lines, out.vocab, *out.spm);
  out.valid = encode_lines(lines, train_lines, lines.size(), out.vocab, *out.spm);
  return out;
}

}  // namespace

LmCorpus load_lm_corpus(const std::string& path, const LmOptions& o) {
  QKV_CHECK(o.tokenizer != TokenizerKind::words, "data.tokenizer",
            "task lm takes \"char\" or \"sentencepiece\", got \"word\"");
  const std::string text = read_text_file(path);
  size_t bad = 0;
  QKV_CHECK(valid_utf8(text, &bad), "data.path", path, ": invalid UTF-8 at byte ", bad);
  const std::vector<char32_t> chars = decode_utf8(text);
  QKV_CHECK(chars.size() >= 20, "data.path", path, " holds ", chars.size(),
            " characters; a language model needs a text to learn from");
  if (o.tokenizer == TokenizerKind::sentencepiece) return load_sentencepiece_corpus(path, text, o);
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

Ids encode_lm_text(const std::string& text, const Vocab& vocab, const SentencePiece* spm,
                   const char* op) {
  if (!spm) return encode_chars(text, vocab, op);
  size_t bad = 0;
  QKV_CHECK(valid_utf8(text, &bad), op, "invalid UTF-8 at byte ", bad);
  const std::vector<std::string> lines = split_lines(text);
  return encode_lines(lines, 0, lines.size(), vocab, *spm);
}

LmDetokenizer::LmDetokenizer(const Vocab& vocab, bool sentencepiece, bool line_start)
    : vocab_(vocab), spm_(sentencepiece), line_start_(line_start) {}

std::string LmDetokenizer::next(int64_t id) {
  if (!spm_) return vocab_.token(id);
  if (id == vocab_.eos()) {
    line_start_ = true;
    return "\n";
  }
  const std::string& piece = vocab_.token(id);
  if (id == vocab_.unk()) return "\xE2\x81\x87";  // U+2047, as SentencePiece shows <unk>
  if (piece.rfind("<", 0) == 0 && piece.back() == '>') return "";  // <pad>, <bos>: nothing
  std::string out;
  const std::string mark = "\xE2\x96\x81";  // U+2581, SentencePiece's word start
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, mark.size(), mark) == 0) {
      if (!(line_start_ && out.empty())) out += ' ';
      i += mark.size();
    } else {
      out += piece[i++];
    }
  }
  if (!out.empty()) line_start_ = false;
  return out;
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
