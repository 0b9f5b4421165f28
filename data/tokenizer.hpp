// Character- and word-level tokenizers over UTF-8 text.
//
// chars: one token per code point, spaces included; detokenize(tokenize(s)) == s exactly.
// words: maximal runs of non-space, non-punctuation characters are words, each punctuation
//   character is a token of its own, and each run of whitespace becomes one " " token (dropped
//   at the ends), so detokenize (plain concatenation) gives back s with its whitespace runs
//   collapsed to single spaces and trimmed: "Hi,  there!" -> ["Hi", ",", " ", "there", "!"].
//   Keeping the space as a token is what makes the round trip exact: "2021.03.03" and
//   "tuesday, 3 mar" need no guessing about where spaces were.
// Text must be valid UTF-8 (qkv::Error otherwise).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/names.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

// sentencepiece: subwords from a trained model (data/sentencepiece.hpp); tokenize() and
// encode() below handle chars and words only, the model does the rest.
enum class TokenizerKind { chars, words, sentencepiece };
inline constexpr EnumName<TokenizerKind> kTokenizerNames[] = {
    {"char", TokenizerKind::chars},
    {"word", TokenizerKind::words},
    {"sentencepiece", TokenizerKind::sentencepiece},
    {"chars", TokenizerKind::chars},  // aliases, read but never written
    {"words", TokenizerKind::words}};
constexpr std::span<const EnumName<TokenizerKind>> names_of(TokenizerKind) {
  return kTokenizerNames;
}

TokenizerKind parse_tokenizer(const std::string& name);  // "char", "word" or "sentencepiece"
const char* tokenizer_name(TokenizerKind k);

std::vector<std::string> tokenize(std::string_view text, TokenizerKind kind);
std::string detokenize(const std::vector<std::string>& tokens);
// The text the word tokenizer round-trips to: whitespace runs -> one space, ends trimmed.
std::string normalize_space(std::string_view text);

// Text -> ids through vocab (unknown tokens -> <unk>), and model ids -> text (stops at <eos>,
// drops <pad> and <bos>).
std::vector<int64_t> encode(std::string_view text, TokenizerKind kind, const Vocab& vocab);
std::string decode(const std::vector<int64_t>& ids, const Vocab& vocab);

}  // namespace qkv::data
