// Guards in front of toml++: the first non-ASCII byte outside strings and comments, and a line
// of too many dotted parts.
//
// TOML 1.0 allows non-ASCII text only inside strings (quoted keys included) and comments; a bare
// key or a value is ASCII. toml++ 3.3.0 (Debian 12) reaches TOML_UNREACHABLE, undefined
// behaviour, when its whitespace test meets some such characters where a key is expected (for
// example a Cyrillic letter in a bare key). Refusing them first, with their line and column, turns
// that into the clear error a user needs, and rejects nothing that TOML accepts.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace qkv::config {

struct TextPos {
  std::size_t line = 1;    // 1-based
  std::size_t column = 1;  // 1-based, in bytes
};

// The position of the first byte >= 0x80 that is not inside a string ("...", '...', """...""",
// '''...''') or a comment (# to the end of the line), a leading byte order mark aside; nullopt
// when there is none.
std::optional<TextPos> first_non_ascii_outside_strings(std::string_view toml);

// The position of the first '.' outside strings and comments that is past the max_dots-th on
// its line; nullopt when there is none. A dotted key (a.b.c = 1, [a.b.c]) makes a table per
// part, and toml++ recurses once per level while parsing: a key of 100,000 parts overflows its
// stack, so such a line is refused before toml++ sees it.
std::optional<TextPos> first_dot_past(std::string_view toml, std::size_t max_dots);

}  // namespace qkv::config
