// UTF-8 helpers for the tokenizers and the corpus reader: validation, code point iteration,
// a simple lowercase mapping and character classes. Strings are std::string holding UTF-8 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::data {

// True when s is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
// On false, *bad_offset (when given) is the byte offset of the first bad sequence.
bool valid_utf8(std::string_view s, size_t* bad_offset = nullptr);

// The code points of s; s must be valid UTF-8 (qkv::Error otherwise).
std::vector<char32_t> decode_utf8(std::string_view s);
// Appends the UTF-8 bytes of code point c to out.
void append_utf8(std::string& out, char32_t c);
// The characters of s, one UTF-8 string per code point (what the character tokenizer emits).
std::vector<std::string> split_chars(std::string_view s);

// Lowercase by simple one-to-one mappings: ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic.
// Enough for the European-language corpora this reads; not full Unicode case folding.
char32_t to_lower(char32_t c);
std::string to_lower_utf8(std::string_view s);

bool is_space(char32_t c);        // ASCII whitespace, NBSP, U+2000..U+200A, U+3000, ...
bool is_punctuation(char32_t c);  // ASCII punctuation and symbols, Latin-1 and general punctuation

}  // namespace qkv::data
