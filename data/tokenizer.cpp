#include "data/tokenizer.hpp"

#include "core/error.hpp"
#include "data/utf8.hpp"

namespace qkv::data {

TokenizerKind parse_tokenizer(const std::string& name) {
  if (const auto k = find_name<TokenizerKind>(name)) return *k;
  throw Error(cat("parse_tokenizer: unknown tokenizer '", name,
                  "' (expected char, word or sentencepiece)"));
}

const char* tokenizer_name(TokenizerKind k) { return name_of(k).data(); }

std::vector<std::string> tokenize(std::string_view text, TokenizerKind kind) {
  size_t bad;
  QKV_CHECK(valid_utf8(text, &bad), "tokenize", "invalid UTF-8 at byte ", bad);
  QKV_CHECK(kind != TokenizerKind::sentencepiece, "tokenize",
            "sentencepiece needs its trained model (SentencePiece::encode)");
  if (kind == TokenizerKind::chars) return split_chars(text);
  std::vector<std::string> out;
  std::string word;
  bool pending_space = false;  // a whitespace run seen since the last token
  auto flush_word = [&] {
    if (!word.empty()) out.push_back(std::move(word)), word.clear();
  };
  auto space_if_pending = [&] {
    if (pending_space && !out.empty()) out.emplace_back(" ");
    pending_space = false;
  };
  for (char32_t c : decode_utf8(text)) {
    if (is_space(c)) {
      flush_word();
      pending_space = true;
    } else if (is_punctuation(c)) {
      flush_word();
      space_if_pending();
      out.emplace_back();
      append_utf8(out.back(), c);
    } else {
      if (word.empty()) space_if_pending();
      append_utf8(word, c);
    }
  }
  flush_word();
  return out;
}

std::string detokenize(const std::vector<std::string>& tokens) {
  std::string s;
  for (const auto& t : tokens) s += t;
  return s;
}

std::string normalize_space(std::string_view text) {
  std::string out;
  bool pending = false;
  for (char32_t c : decode_utf8(text)) {
    if (is_space(c)) {
      pending = !out.empty();
      continue;
    }
    if (pending) out += ' ', pending = false;
    append_utf8(out, c);
  }
  return out;
}

std::vector<int64_t> encode(std::string_view text, TokenizerKind kind, const Vocab& vocab) {
  return vocab.encode(tokenize(text, kind));
}

std::string decode(const std::vector<int64_t>& ids, const Vocab& vocab) {
  return detokenize(vocab.decode(ids));
}

}  // namespace qkv::data
